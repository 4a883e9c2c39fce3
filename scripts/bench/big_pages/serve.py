# Serves large generated pages on 127.0.0.1 only, for scripts/bench/big_pages/measure.sh:
# /len/N (with Content-Length) and /chunked/N (without), N bytes of markup.
import sys, http.server, socketserver
LINE = b'<p>filler filler filler filler filler filler filler filler.</p>\n'
CHUNK = LINE * 512
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a): pass
    def do_GET(self):
        parts = self.path.strip('/').split('/')
        if len(parts) != 2 or parts[0] not in ('len', 'chunked'):
            self.send_response(404); self.send_header('Content-Length', '0'); self.end_headers(); return
        n = int(parts[1]); chunked = parts[0] == 'chunked'
        self.send_response(200)
        self.send_header('Content-Type', 'text/html; charset=utf-8')
        if chunked: self.send_header('Transfer-Encoding', 'chunked')
        else: self.send_header('Content-Length', str(n))
        self.end_headers()
        left = n
        try:
            while left > 0:
                c = CHUNK[:min(left, len(CHUNK))]; left -= len(c)
                if chunked: self.wfile.write(b'%x\r\n' % len(c) + c + b'\r\n')
                else: self.wfile.write(c)
            if chunked: self.wfile.write(b'0\r\n\r\n')
        except (BrokenPipeError, ConnectionResetError):
            pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
