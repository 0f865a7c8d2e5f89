// ember/chat.h: one message of a conversation (Model::chat_prompt renders a list of them with the model's template).
#pragma once
#include <string>

namespace ember {

struct ChatMessage {
    std::string role;  // "system", "user", "assistant", ...
    std::string content;
};

}  // namespace ember
