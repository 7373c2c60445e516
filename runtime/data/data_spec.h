// The data flags' forms (--data, --eval-data): "synthetic", or a kind and a
// path: tensors:FILE, imagefolder:DIR, tokens:PATH.
#pragma once

#include <string>

namespace ddp {

// The path after `kind` (e.g. "tensors:") when `spec` is of that kind and
// names a path; else "".
inline std::string SpecPath(const std::string& spec, const std::string& kind) {
  return spec.rfind(kind, 0) == 0 ? spec.substr(kind.size()) : std::string();
}

// The path of a spec of any kind; "" for synthetic.
inline std::string SpecPath(const std::string& spec) {
  for (const char* kind : {"tensors:", "imagefolder:", "tokens:"}) {
    if (std::string path = SpecPath(spec, kind); !path.empty()) return path;
  }
  return std::string();
}

}  // namespace ddp
