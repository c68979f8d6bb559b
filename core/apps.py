from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here, once every app's models are loaded (they import models, which AppConfig modules cannot).
        from core import providers, throttle  # noqa: F401  (throttle's signal receivers count failed logins)
        from core.agents import versions
        from core.runs import callbacks, executor, multiagent, queue, schedules, sleeptime, tool_exec
        from core.telemetry import metrics
        from core.web import consumers  # noqa: F401  (its receiver closes a session's websockets at logout)
        from tools import signals

        # Lower layers call up through these instead of importing the modules above them.
        signals.agent_tools_changed.connect(versions.on_agent_tools_changed, dispatch_uid="core.versions.tools")
        signals.tool_code_changed.connect(versions.on_tool_code_changed, dispatch_uid="core.versions.tool_code")
        executor.run_ended.connect(sleeptime.sleeptime_after_run, dispatch_uid="core.sleeptime.after_run")
        executor.run_ended.connect(callbacks.on_run_ended, dispatch_uid="core.runs.callbacks")
        queue.swept.connect(schedules.on_lease_sweep, dispatch_uid="core.schedules.dispatch")
        tool_exec.multi_agent_tool_run = multiagent.tool_run
        metrics.operator_models = providers.operator_model_handles  # metrics sits below the model client providers uses
