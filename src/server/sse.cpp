// sse.cpp: SSE framing.
#include "server/sse.h"

namespace ember::server {

std::string sse_data(const ojson& j) { return "data: " + dump_json(j) + "\n\n"; }
std::string sse_done() { return "data: [DONE]\n\n"; }
std::string sse_keepalive() { return ": keep-alive\n\n"; }

}  // namespace ember::server
