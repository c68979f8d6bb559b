"""The IDE's web pages (server-rendered templates + htmx partials), its websocket consumer and middleware.
Thin: parse, call a service/selector, render. Entry points: they may import any layer below."""
