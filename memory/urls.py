from django.urls import path

from memory import views

urlpatterns = [
    path("agents/<str:agent_id>/blocks/", views.agent_blocks, name="agent_blocks"),
    path("agents/<str:agent_id>/blocks/new/", views.block_new, name="agent_block_new"),
    path("agents/<str:agent_id>/blocks/<str:action>/", views.block_attach_toggle, name="agent_block_toggle"),
    path("agents/<str:agent_id>/blocks/<str:block_id>/save/", views.block_save, name="agent_block_save"),
    path("agents/<str:agent_id>/blocks/<str:block_id>/card/", views.block_card, name="agent_block_card"),
    path("agents/<str:agent_id>/archival/", views.archival, name="agent_archival"),
    path("agents/<str:agent_id>/archival/insert/", views.archival_insert, name="agent_archival_insert"),
    path(
        "agents/<str:agent_id>/archival/<str:passage_id>/delete/", views.archival_delete, name="agent_archival_delete"
    ),
    path("agents/<str:agent_id>/recall/", views.recall, name="agent_recall"),
    path("blocks/", views.blocks_page, name="blocks"),
    path("blocks/<str:block_id>/", views.block_detail, name="block_detail"),
    path("blocks/<str:block_id>/restore/<int:version>/", views.block_restore, name="block_restore"),
]
