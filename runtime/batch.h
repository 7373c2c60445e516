// A batch of named tensors: what data sources yield and models take.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace ddp {

// Named tensors on the rank's device (DESIGN.md's names: "images",
// "labels"; "input_ids", "token_type_ids", "attention_mask", "labels",
// "next_sentence_label"), and where the batch sits in the run: the
// optimizer step and the global index of its first sample (dropout masks
// depend on both, never on the rank).
struct Batch {
  std::vector<std::pair<std::string, Tensor>> tensors;
  int64_t step = 0;
  int64_t first_sample = 0;
  // Non-padding tokens (the attention mask's sum) where the data has them,
  // counted on the host as the batch was filled; 0 for images.
  int64_t real_tokens = 0;
  // Samples whose file would not decode, replaced by others (imagefolder).
  int64_t replaced_samples = 0;

  // Null when absent.
  const Tensor* Find(const std::string& name) const {
    for (const auto& [n, t] : tensors) {
      if (n == name) return &t;
    }
    return nullptr;
  }
  const Tensor& Get(const std::string& name) const {
    const Tensor* t = Find(name);
    CHECK(t != nullptr) << "the batch has no tensor '" << name << "'";
    return *t;
  }
};

}  // namespace ddp
