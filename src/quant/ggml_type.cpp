#include "quant/ggml_type.h"

namespace ember {

GgmlTypeTraits ggml_type_traits(uint32_t id) {
    switch (static_cast<GgmlType>(id)) {
        case GgmlType::F32: return {"F32", 1, 4, true};
        case GgmlType::F16: return {"F16", 1, 2, true};
        case GgmlType::BF16: return {"BF16", 1, 2, true};
        case GgmlType::F64: return {"F64", 1, 8, false};
        case GgmlType::I8: return {"I8", 1, 1, false};
        case GgmlType::I16: return {"I16", 1, 2, false};
        case GgmlType::I32: return {"I32", 1, 4, false};
        case GgmlType::I64: return {"I64", 1, 8, false};
        case GgmlType::Q4_0: return {"Q4_0", 32, 18, true};
        case GgmlType::Q4_1: return {"Q4_1", 32, 20, true};
        case GgmlType::Q5_0: return {"Q5_0", 32, 22, true};
        case GgmlType::Q5_1: return {"Q5_1", 32, 24, false};
        case GgmlType::Q8_0: return {"Q8_0", 32, 34, true};
        case GgmlType::Q8_1: return {"Q8_1", 32, 36, false};
        case GgmlType::Q2_K: return {"Q2_K", 256, 84, false};
        case GgmlType::Q3_K: return {"Q3_K", 256, 110, false};
        case GgmlType::Q4_K: return {"Q4_K", 256, 144, true};
        case GgmlType::Q5_K: return {"Q5_K", 256, 176, true};
        case GgmlType::Q6_K: return {"Q6_K", 256, 210, true};
        case GgmlType::Q8_K: return {"Q8_K", 256, 292, false};
        case GgmlType::IQ2_XXS: return {"IQ2_XXS", 256, 66, false};
        case GgmlType::IQ2_XS: return {"IQ2_XS", 256, 74, false};
        case GgmlType::IQ3_XXS: return {"IQ3_XXS", 256, 98, false};
        case GgmlType::IQ1_S: return {"IQ1_S", 256, 50, false};
        case GgmlType::IQ4_NL: return {"IQ4_NL", 32, 18, false};
        case GgmlType::IQ3_S: return {"IQ3_S", 256, 110, false};
        case GgmlType::IQ2_S: return {"IQ2_S", 256, 82, false};
        case GgmlType::IQ4_XS: return {"IQ4_XS", 256, 136, false};
        case GgmlType::IQ1_M: return {"IQ1_M", 256, 56, false};
        case GgmlType::TQ1_0: return {"TQ1_0", 256, 54, false};
        case GgmlType::TQ2_0: return {"TQ2_0", 256, 66, false};
        case GgmlType::MXFP4: return {"MXFP4", 32, 17, false};
    }
    return {nullptr, 0, 0, false};
}

}  // namespace ember
