// TempDir: a fresh, uniquely named directory under the system temp dir (mkdtemp), removed with its contents
// on destruction. Used by tests that write files (loaders, writer, converter, CLI).
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/check.h"

namespace ember {

class TempDir {
public:
    explicit TempDir(const std::string& prefix = "ember") {
        std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        EMBER_CHECK(mkdtemp(buf.data()) != nullptr, "mkdtemp failed for %s", tmpl.c_str());
        p = buf.data();
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return p; }

    std::filesystem::path p;
};

}  // namespace ember
