"""Run by path, with `python -S`, for the Python workers Spark starts itself and gives a fixed
10 s to connect back (settings/python_workers.py starts it): connect back and authenticate
first, with the standard library alone, then load site-packages and the worker's module and run
its `main` on the connection. Spark's own `__main__` of those modules does the same steps the
other way round: imports first (pyspark, and what the worker needs), then the connection, which
on a machine busy at many times its cores took longer than the 10 s.

The protocol is pyspark's `worker_util.get_sock_file_to_executor`: a Unix socket without a
secret, or 127.0.0.1 (::1) with the secret sent length-prefixed and "ok" read back; then the
worker's pid as a 4-byte int. Imports nothing outside the standard library before that."""

import os
import socket
import struct
import sys
from typing import Any


def _read_text(stream: Any) -> str:
    (length,) = struct.unpack("!i", stream.read(4))
    return str(stream.read(length).decode("utf-8"))


def connect_back() -> Any:
    timeout = int(os.environ.get("SPARK_AUTH_SOCKET_TIMEOUT", 15))
    buffer = int(os.environ.get("SPARK_BUFFER_SIZE", 65536))
    path = os.environ.get("PYTHON_WORKER_FACTORY_SOCK_PATH")
    secret = os.environ.get("PYTHON_WORKER_FACTORY_SECRET")
    if path is not None and secret is None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(path)
    else:
        ipv6 = os.environ.get("SPARK_PREFER_IPV6", "false").lower() == "true"
        port = int(os.environ["PYTHON_WORKER_FACTORY_PORT"])
        sock = socket.create_connection(("::1" if ipv6 else "127.0.0.1", port), timeout)
    stream = sock.makefile("rwb", buffer)
    if secret is not None:
        data = secret.encode("utf-8")
        stream.write(struct.pack("!i", len(data)) + data)
        stream.flush()
        if _read_text(stream) != "ok":
            raise SystemExit("slipstream: Spark refused the Python worker's secret")
    sock.settimeout(None)  # connected: the imports below may take long on a busy machine
    stream.write(struct.pack("!i", os.getpid()))
    stream.flush()
    return stream


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder is not a place to import from
    module = sys.argv[1]
    stream = connect_back()
    try:
        import importlib
        import site

        site.main()  # site-packages (and their .pth files), as a python without -S has
        importlib.import_module(module).main(stream, stream)
    finally:
        stream.close()
