"""Runs inside a sandbox, before the command it starts: lowers the resource limits, and when the sandbox may use
the network, relays 127.0.0.1:PORT (the only network the sandbox has) to the server's egress proxy, whose Unix
socket is mounted in. The command gets HTTP(S)_PROXY pointing at that port from its environment.

    python -I -S _relay.py [--limits cpu_s,memory_mb,file_size_mb,nproc] [--proxy SOCKET PORT] -- COMMAND ARGS...

Without --proxy it sets the limits and becomes the command (exec). With it, it starts the command as its child
(stdin, stdout, stderr and every other descriptor inherited), relays connections in one thread, and exits as the
command did. Standard library only, no site-packages: it must run under any interpreter the sandbox mounts.
"""

import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading

_MB = 1024 * 1024
_CHUNK = 65536


def apply_limits(spec):
    """Lower soft and hard limits (a limit already lower stays); memory is the data segment, not the address
    space, so runtimes that reserve large address ranges up front (V8, the JVM) still start."""
    values = [int(v) if v else None for v in spec.split(",")]
    names = ("RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NPROC")
    scale = (1, _MB, _MB, 1)
    for name, value, unit in zip(names, values, scale, strict=True):
        if value is None or not hasattr(resource, name):
            continue
        which = getattr(resource, name)
        target = value * unit
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY and hard < target:
            target = hard
        resource.setrlimit(which, (target, target))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class Relay:
    """127.0.0.1:port -> the proxy's Unix socket, every connection, in one thread (threads count as processes)."""

    def __init__(self, socket_path, port):
        self.socket_path = socket_path
        self.listener = socket.create_server(("127.0.0.1", port), backlog=64)
        self.listener.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.peer = {}

    def serve(self):
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    self._accept()
                else:
                    self._pump(key.fileobj)

    def _accept(self):
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.socket_path)
        except OSError:
            client.close()
            upstream.close()
            return
        for sock in (client, upstream):
            sock.setblocking(False)
        self.peer[client], self.peer[upstream] = upstream, client
        self.selector.register(client, selectors.EVENT_READ, True)
        self.selector.register(upstream, selectors.EVENT_READ, True)

    def _pump(self, sock):
        other = self.peer.get(sock)
        try:
            data = sock.recv(_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data and other is not None:
            try:
                other.setblocking(True)
                other.sendall(data)
                other.setblocking(False)
                return
            except OSError:
                pass
        for s in (sock, other):
            if s is not None and s in self.peer:
                self.selector.unregister(s)
                self.peer.pop(s, None)
                s.close()


def main(argv):
    limits, proxy = None, None
    while argv and argv[0] != "--":
        if argv[0] == "--limits":
            limits, argv = argv[1], argv[2:]
        elif argv[0] == "--proxy":
            proxy, argv = (argv[1], int(argv[2])), argv[3:]
        else:
            sys.exit(f"relay: unknown option {argv[0]}")
    command = argv[1:]
    if not command:
        sys.exit("relay: no command")
    if limits:
        apply_limits(limits)
    if proxy is None:
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.exit(f"relay: cannot run {command[0]}: {exc}")
    relay = Relay(*proxy)
    threading.Thread(target=relay.serve, daemon=True).start()
    try:
        child = subprocess.Popen(command, close_fds=False)
    except OSError as exc:
        sys.exit(f"relay: cannot run {command[0]}: {exc}")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    code = child.wait()
    sys.exit(128 - code if code < 0 else code)  # killed by signal N: 128+N, as a shell reports it


if __name__ == "__main__":
    main(sys.argv[1:])
