from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here, once every app's models are loaded (they import models, which AppConfig modules cannot).
        from tools import mcp_client, mcp_services

        # The MCP client calls up to its services through this hook instead of importing them.
        mcp_client.tools_changed_hook = mcp_services.mcp_tools_changed

        # Say at start whether local tool runs get namespaces, run weakly isolated, or are refused.
        from django.conf import settings

        # (the sandbox modules import models too)
        from tools.sandbox.base import SandboxError
        from tools.sandbox.local import LocalSandbox, log_isolation_status

        try:
            log_isolation_status(LocalSandbox(allow_weak_isolation=bool(settings.SANDBOX_LOCAL_WEAK_ISOLATION)))
        except (SandboxError, OSError) as exc:
            import logging

            logging.getLogger("tools.sandbox").error("local tool sandbox unusable: %s", exc)
