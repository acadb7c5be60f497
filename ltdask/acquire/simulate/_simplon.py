"""The SIMPLON REST API of the DECTRIS simulator (http.server on 127.0.0.1).

What a client of a detector control unit asks before a series: the API's version,
detector configuration values (read: ``x_pixels_in_detector``, ``y_pixels_in_detector``,
``bit_depth_image``; put: ``trigger_mode``, ``ntrigger``, ``nimages``, ``compression``,
``frame_time`` that paces the frames...), the stream's and file writer's settings, and the
commands ``arm`` (the series' header goes out; with ``exte``/``exts`` the frames follow),
``trigger`` (the frames of ``ints``/``inte``), ``disarm``, ``cancel``, ``abort``,
``initialize``. Values are JSON ``{"value": ...}`` both ways, as the DECTRIS client (and
LiberTEM-live's) sends them.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

VERSION = "1.8.0"
#: detector settings a client may not change (they are the recorded frames')
READ_ONLY = ("x_pixels_in_detector", "y_pixels_in_detector", "bit_depth_image")
_PATH = re.compile(r"^/(detector|stream|filewriter)/api/([^/]+)/(config|command|status)/([^/?]*)")
_TYPES = {bool: "bool", int: "uint", float: "float", str: "string"}


def serve(sim: Any, port: int) -> tuple[HTTPServer, threading.Thread]:
    """Serve the REST API of `sim` (a `~ltdask.acquire.simulate.dectris.DectrisSimulator`:
    its ``config``, ``series``, ``rate`` and ``armed``/``triggered`` events) on
    127.0.0.1:`port` (0: a free port) in a thread."""
    settings: dict[str, dict] = {
        "stream": {"mode": "enabled", "header_detail": "basic"},
        "filewriter": {"mode": "disabled", "nimages_per_file": 1000, "name_pattern": "series"},
    }

    class Handler(BaseHTTPRequestHandler):
        timeout = 5.0  # (a client that stops mid-request does not hold the server)

        def log_message(self, format, *args) -> None:  # noqa: A002
            pass

        def _answer(self, status: int, value) -> None:
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not raw.strip():
                return None
            try:
                data = json.loads(raw)
            except ValueError:
                return None
            return data.get("value") if isinstance(data, dict) else data

        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            if self.path.rstrip("/") in ("/detector/api/version", "/stream/api/version"):
                return self._answer(200, {"value": VERSION, "value_type": "string"})
            match = _PATH.match(self.path)
            if not match:
                return self._answer(404, {"error": f"no resource {self.path}"})
            module, _, kind, param = match.groups()
            if kind == "status":
                state = "ready" if sim.armed.is_set() else "idle"
                return self._answer(200, {"value": state, "value_type": "string"})
            values = sim.config if module == "detector" else settings[module]
            if kind != "config" or param not in values:
                return self._answer(404, {"error": f"{module} has no {kind} {param!r}"})
            value = values[param]
            access = "r" if param in READ_ONLY else "rw"
            kind_name = _TYPES.get(type(value), "string")
            return self._answer(
                200, {"value": value, "value_type": kind_name, "access_mode": access}
            )

        def do_PUT(self) -> None:  # noqa: N802
            match = _PATH.match(self.path)
            if not match:
                return self._answer(404, {"error": f"no resource {self.path}"})
            module, _, kind, param = match.groups()
            value = self._body()
            if kind == "command" and module == "detector":
                return self._command(param)
            if kind != "config":
                return self._answer(404, {"error": f"no resource {self.path}"})
            if module != "detector":
                settings[module][param] = value
                return self._answer(200, [param])
            if param in READ_ONLY and value != sim.config.get(param):
                return self._answer(
                    400, {"error": f"{param} is {sim.config.get(param)} (read only)"}
                )
            if sim.armed.is_set():
                return self._answer(400, {"error": "the detector is armed: disarm first"})
            if param == "frame_time":
                if not isinstance(value, (int, float)) or value <= 0:
                    return self._answer(400, {"error": f"frame_time={value!r}: expected s > 0"})
                sim.rate = 1.0 / value  # (the frames follow at the detector's frame rate)
            sim.config[param] = value
            return self._answer(200, [param])

        def _command(self, name: str) -> None:
            if name == "arm":
                sim.armed.set()
                if sim.config.get("trigger_mode", "exte") in ("exte", "exts"):
                    sim.triggered.set()
            elif name == "trigger":
                if not sim.armed.is_set():
                    return self._answer(400, {"error": "trigger before arm"})
                sim.triggered.set()
            elif name in ("disarm", "cancel", "abort"):
                sim.armed.clear()
            elif name not in ("initialize", "hv_reset"):
                return self._answer(404, {"error": f"no command {name!r}"})
            if name in ("arm", "disarm", "cancel", "abort"):
                return self._answer(200, {"sequence id": sim.series})
            return self._answer(200, {})

    server = HTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.1},
        name="ltdask dectris simulator REST",
        daemon=True,
    )
    thread.start()
    return server, thread
