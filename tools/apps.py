from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Say at start whether local tool runs get namespaces, run weakly isolated, or are refused.
        from django.conf import settings

        from tools.sandbox.base import SandboxError
        from tools.sandbox.local import LocalSandbox, log_isolation_status

        try:
            log_isolation_status(LocalSandbox(allow_weak_isolation=bool(settings.SANDBOX_LOCAL_WEAK_ISOLATION)))
        except (SandboxError, OSError) as exc:
            import logging

            logging.getLogger("tools.sandbox").error("local tool sandbox unusable: %s", exc)
