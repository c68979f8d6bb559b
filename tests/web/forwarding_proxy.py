"""A small HTTP/1.1 reverse proxy for the tests, run as its own process, as nginx's `proxy_add_x_forwarded_for` would:

    python -m tests.web.forwarding_proxy LISTEN_PORT UPSTREAM_PORT SOURCE_ADDRESS

It listens on 127.0.0.1:LISTEN_PORT and forwards each request to 127.0.0.1:UPSTREAM_PORT from SOURCE_ADDRESS (a
loopback address of its own, so the server can tell the proxy from its clients), appending the address the request
came from to X-Forwarded-For. One request per connection: it asks both sides to close after the response.
"""

import asyncio
import sys

HEAD_LIMIT = 64 * 1024


def _forwarded_head(head: bytes, client: str) -> bytes:
    """The request head with `client` appended to X-Forwarded-For (a header the client sent is kept, as nginx does)
    and `Connection: close`."""
    request_line, *lines = head.decode("latin-1").split("\r\n")
    kept, forwarded = [], []
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip().lower() == "x-forwarded-for":
            forwarded.append(value.strip())
        elif name.strip().lower() != "connection":
            kept.append(line)
    forwarded.append(client)
    return "\r\n".join(
        [request_line, *kept, f"X-Forwarded-For: {', '.join(forwarded)}", "Connection: close", "", ""]
    ).encode("latin-1")


def _content_length(head: bytes) -> int:
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return int(value.strip())
    return 0


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(65536):
        writer.write(chunk)
        await writer.drain()


async def _serve(client_reader, client_writer, upstream_port: int, source: str) -> None:
    try:
        head = await client_reader.readuntil(b"\r\n\r\n")
        if len(head) > HEAD_LIMIT:
            return
        body = await client_reader.readexactly(_content_length(head))
        upstream_reader, upstream_writer = await asyncio.open_connection(
            "127.0.0.1", upstream_port, local_addr=(source, 0)
        )
        upstream_writer.write(_forwarded_head(head[:-4], client_writer.get_extra_info("peername")[0]) + body)
        await upstream_writer.drain()
        await _pipe(upstream_reader, client_writer)
        upstream_writer.close()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        client_writer.close()


async def main(listen_port: int, upstream_port: int, source: str) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, upstream_port, source), "127.0.0.1", listen_port, limit=HEAD_LIMIT
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
