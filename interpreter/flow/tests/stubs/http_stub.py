"""A tiny HTTP server for the runtime's tests, on 127.0.0.1 only.

Every request is appended to LOG (one JSON line). Routes:
  GET  /items/<id>       -> {"method", "path", "id"}
  POST /orders           -> {"method", "path", "body", "idempotency_key"}
  *    /fail             -> 500
  POST /v1/chat/completions -> an OpenAI-style reply whose content echoes the
                           Authorization header (to test secret redaction)
Prints the port on stdout once listening.
"""
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

LOG = sys.argv[1]

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with open(LOG, "a") as log:
            log.write(json.dumps({"method": method, "path": self.path, "body": body,
                                  "idempotency_key": self.headers.get("Idempotency-Key"),
                                  "x_flow": self.headers.get("X-Flow")}) + "\n")
        if self.path == "/fail":
            return self.reply(500, {"error": "boom"})
        if self.path.startswith("/items/"):
            return self.reply(200, {"method": method, "path": self.path, "id": self.path.split("/")[-1]})
        if self.path == "/orders":
            return self.reply(200, {"method": method, "path": self.path, "body": body,
                                    "idempotency_key": self.headers.get("Idempotency-Key")})
        if self.path.endswith("/chat/completions"):
            auth = self.headers.get("Authorization") or ""
            content = json.dumps({"title": "echo " + auth})
            return self.reply(200, {"id": "x", "object": "chat.completion", "model": "stub",
                                    "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant", "content": content}}],
                                    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})
        return self.reply(404, {"error": "no route"})

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
