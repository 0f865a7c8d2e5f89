// Helpers for the model-vs-oracle tests: locating the ember binary and fixtures, running the CLI,
// reading raw float32 logits and comparing them row by row.
#pragma once

#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/temp_dir.h"
#include <stdexcept>
#include <string>
#include <vector>

namespace ember_test {

namespace fs = std::filesystem;

inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Repository root: $EMBER_SOURCE_DIR, else the compile definition, else "".
inline std::string source_dir() {
  std::string s = env_or_empty("EMBER_SOURCE_DIR");
#ifdef EMBER_SOURCE_DIR
  if (s.empty()) s = EMBER_SOURCE_DIR;
#endif
  return s;
}

inline std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + p.string());
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Raw little-endian float32 file (the hosts we run on are little-endian).
inline std::vector<float> read_f32(const fs::path& p) {
  std::string bytes = read_text(p);
  if (bytes.size() % sizeof(float) != 0) throw std::runtime_error(p.string() + ": size not a multiple of 4");
  std::vector<float> v(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(v.data()));
  return v;
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

using TempDir = ::ember::TempDir;  // src/core/temp_dir.h

struct CmdResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;  // stdout + stderr of the command
};

inline CmdResult run_command(const std::string& cmd, const fs::path& log_file) {
  CmdResult r;
  int st = std::system((cmd + " > " + shell_quote(log_file.string()) + " 2>&1").c_str());
  if (st != -1 && WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  std::error_code ec;
  if (fs::exists(log_file, ec)) r.output = read_text(log_file);
  return r;
}

inline size_t argmax_row(const float* x, size_t n) {
  return static_cast<size_t>(std::max_element(x, x + n) - x);
}

// ||a - b|| / ||b|| for one row.
inline double rel_l2_row(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num) / std::sqrt(den);
}

inline void log_softmax_row(const float* x, size_t n, std::vector<double>& out) {
  out.resize(n);
  double m = *std::max_element(x, x + n), s = 0;
  for (size_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - m);
  double lse = m + std::log(s);
  for (size_t i = 0; i < n; ++i) out[i] = double(x[i]) - lse;
}

// KL(p_ref || p_ours) for one row of logits.
inline double kl_row(const float* ref, const float* ours, size_t n) {
  std::vector<double> lp, lq;
  log_softmax_row(ref, n, lp);
  log_softmax_row(ours, n, lq);
  double kl = 0;
  for (size_t i = 0; i < n; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

struct RowReport {
  double worst = 0;       // worst metric value over rows
  size_t worst_row = 0;
  size_t rows_over = 0;   // rows with metric > tolerance (or NaN)
  size_t argmax_mismatch = 0;
  size_t first_argmax_mismatch = 0;
  std::string describe() const {
    std::ostringstream os;
    os << "worst " << worst << " at row " << worst_row << ", rows over tolerance " << rows_over
       << ", argmax mismatches " << argmax_mismatch;
    if (argmax_mismatch) os << " (first at row " << first_argmax_mismatch << ")";
    return os.str();
  }
};

// metric: "rel_l2" or "kl". Both arrays are [rows, vocab].
inline RowReport compare_rows(const std::vector<float>& ours, const std::vector<float>& ref, size_t rows,
                              size_t vocab, const std::string& metric, double tol) {
  RowReport r;
  for (size_t t = 0; t < rows; ++t) {
    const float* a = ours.data() + t * vocab;
    const float* b = ref.data() + t * vocab;
    double v = metric == "kl" ? kl_row(b, a, vocab) : rel_l2_row(a, b, vocab);
    if (std::isnan(v) || v > r.worst) {
      r.worst = std::isnan(v) ? INFINITY : v;
      r.worst_row = t;
    }
    if (!(v <= tol)) ++r.rows_over;
    if (argmax_row(a, vocab) != argmax_row(b, vocab)) {
      if (r.argmax_mismatch++ == 0) r.first_argmax_mismatch = t;
    }
  }
  return r;
}

}  // namespace ember_test
