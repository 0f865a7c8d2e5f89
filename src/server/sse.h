// sse.h: Server-Sent Events framing (text/event-stream) as the OpenAI streaming API uses it: one
// "data: <json>\n\n" event per chunk, "data: [DONE]\n\n" at the end, ": ..." comment lines as keep-alives.
#pragma once
#include <string>

#include "server/openai_types.h"

namespace ember::server {

inline constexpr const char* kSseContentType = "text/event-stream";
std::string sse_data(const ojson& j);  // "data: {...}\n\n" (one line: JSON has no raw newlines)
std::string sse_done();                // "data: [DONE]\n\n"
std::string sse_keepalive();           // ": keep-alive\n\n" (ignored by clients; detects a closed connection)

}  // namespace ember::server
