// web_assets.h: the files of the web chat page (src/server/web/), compiled into the binary by
// cmake/ember_embed.cmake at build time.
#pragma once
#include <cstddef>

namespace ember::server {

struct EmbeddedFile {
    const char* name;            // base name: "index.html", "chat.js", ...
    const unsigned char* data;
    size_t size;
};
extern const EmbeddedFile kEmbeddedFiles[];
extern const size_t kEmbeddedFileCount;

}  // namespace ember::server
