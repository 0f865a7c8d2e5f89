// gguf_vocab_json.h: a GgufVocab from the JSON dump of a GGUF file's tokenizer metadata that
// scripts/gguf_vocab_dump.py writes (gguf-py's GGUFReader): the fixtures tests/fixtures/smollm2/vocab.json and
// tests/fixtures/gguf_tokenizer/*_vocab.json, read by the tokenizer tests and the fuzz targets instead of a
// multi-megabyte GGUF file.
//   {"model", "pre", "tokens", "token_types", "merges", "bos_id", "eos_id", "eot_id", "eom_id", "pad_id",
//    "unk_id"} required; "add_bos", "add_eos", "add_space_prefix" (null = unset), "extra_eos", "scores" optional.
#pragma once
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/gguf_vocab.h"

namespace ember {

// A missing key or a value of the wrong type gives an error naming it (never an exception).
Expected<GgufVocab> gguf_vocab_from_json(const nlohmann::json& j);

}  // namespace ember
