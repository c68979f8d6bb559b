from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Signal receivers: login throttling counts failures; logout closes the session's websockets.
        from core import throttle  # noqa: F401
