"""The IDE's web pages (server-rendered templates + htmx partials). Thin: parse, call a service/selector, render."""
