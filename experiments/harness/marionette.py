"""A minimal Marionette client: the protocol Firefox speaks on its --marionette port
(loopback only), length-prefixed JSON, `<length>:<json>`. A command is
[0, id, name, parameters]; its answer [1, id, error, result]. Any command name is
sent as given (firefox_record.py uses a few WebDriver commands and Marionette:Quit);
standard library only (no marionette-driver).
"""

from __future__ import annotations

import json
import socket
import time


class MarionetteError(Exception):
    """Firefox answered a command with an error, or the connection failed."""


class Marionette:
    def __init__(self, port: int, timeout: float = 60.0):
        self.port, self.timeout, self.next_id = port, timeout, 1
        self.socket: socket.socket | None = None
        self.pending = b""

    def connect(self, deadline: float, alive) -> dict:
        """Connects (Firefox opens the port a few seconds after it starts) and reads
        the server's greeting. `alive()` says whether the browser is still running."""
        while True:
            try:
                self.socket = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                self.socket.settimeout(self.timeout)
                return self.receive()
            except OSError as error:
                if self.socket is not None:
                    self.socket.close()
                    self.socket = None
                if time.monotonic() > deadline or not alive():
                    message = (f"no Marionette server on 127.0.0.1:{self.port} "
                               "(did firefox-esr start with --marionette?)")
                    raise MarionetteError(message) from error
                time.sleep(0.25)

    def receive(self) -> object:
        while b":" not in self.pending:
            self.pending += self.read_some()
        length_text, _, rest = self.pending.partition(b":")
        length = int(length_text)
        while len(rest) < length:
            rest += self.read_some()
        self.pending = rest[length:]
        return json.loads(rest[:length])

    def read_some(self) -> bytes:
        data = self.socket.recv(1 << 16)
        if not data:
            raise MarionetteError("Firefox closed the Marionette connection")
        return data

    def command(self, name: str, parameters: dict | None = None, timeout: float | None = None):
        message_id = self.next_id
        self.next_id += 1
        data = json.dumps([0, message_id, name, parameters or {}]).encode()
        self.socket.settimeout(timeout or self.timeout)
        self.socket.sendall(str(len(data)).encode() + b":" + data)
        while True:
            answer = self.receive()
            if (isinstance(answer, list) and len(answer) == 4 and answer[0] == 1
                    and answer[1] == message_id):
                break
        _, _, error, result = answer
        if error:
            raise MarionetteError(f"{name}: {error.get('error')}: {error.get('message', '')[:300]}")
        return result.get("value", result) if isinstance(result, dict) else result

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close()
            self.socket = None
