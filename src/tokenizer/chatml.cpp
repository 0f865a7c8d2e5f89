// chatml.cpp: the ChatML prompt format used by Qwen chat models.
#include "tokenizer/tokenizer.h"

namespace ember {

std::string apply_chatml(const std::vector<ChatMessage>& msgs, bool add_generation_prompt, bool enable_thinking) {
    std::string out;
    for (const ChatMessage& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) {
        out += "<|im_start|>assistant\n";
        if (!enable_thinking) out += "<think>\n\n</think>\n\n";
    }
    return out;
}

}  // namespace ember
