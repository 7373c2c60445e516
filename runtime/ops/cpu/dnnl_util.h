// oneDNN plumbing shared by the CPU ops: the engine and stream, a cache of
// primitives keyed by shape, and checked calls.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/execution_context.h"
#include "runtime/tensor.h"

namespace ddp::cpu {

dnnl::engine& DnnlEngine();
dnnl::stream& DnnlStream();

// oneDNN's name for an f32 or bf16 dtype (fatal for others).
dnnl::memory::data_type DnnlType(DType dtype);
// Whether oneDNN runs bf16 convolutions and matmuls on native instructions
// here (AVX-512 BF16 or AMX); elsewhere it emulates them, slower than f32.
bool CpuHasNativeBf16();

// A user tensor (f32 or bf16) wrapped as oneDNN memory of the given plain
// layout.
dnnl::memory UserMemory(const Tensor& t, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag);

// What ToPrimitiveLayout and OutputInPrimitiveLayout allocate for a user
// tensor of layout `user` (slot `slot`'s scratch, when the primitive wants
// another layout), without data: the meta device's plan of a CPU step.
void ReserveLayoutScratch(ExecutionContext& ctx, int slot, const dnnl::memory::desc& user,
                          const dnnl::memory::desc& wanted);

// Returns `user` if the primitive wants its layout, else reorders it into
// context scratch slot `slot` and returns that.
dnnl::memory ToPrimitiveLayout(ExecutionContext& ctx, int slot, dnnl::memory user,
                               const dnnl::memory::desc& wanted);
// Memory of layout `wanted` for an output: `user` itself when layouts match,
// else a scratch buffer to reorder back into `user` with FromPrimitiveLayout.
dnnl::memory OutputInPrimitiveLayout(ExecutionContext& ctx, int slot, const dnnl::memory& user,
                                     const dnnl::memory::desc& wanted);
void FromPrimitiveLayout(dnnl::memory produced, dnnl::memory user);

// Primitives and their descriptors are costly to create; ops look them up by
// a key naming the op, shapes and parameters.
class PrimitiveCache {
 public:
  template <typename Entry>
  Entry& GetOrCreate(const std::string& key, const std::function<Entry()>& create) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      it = entries_.emplace(key, std::make_shared<Entry>(create())).first;
    }
    return *static_cast<Entry*>(it->second.get());
  }

 private:
  std::unordered_map<std::string, std::shared_ptr<void>> entries_;
};

PrimitiveCache& GetPrimitiveCache();

// Runs a oneDNN call, turning its exception into a fatal error naming `what`.
void DnnlCheck(const char* what, const std::function<void()>& call);

// A primitive of type P (dnnl::matmul, dnnl::convolution_forward, ...) and
// its descriptor, as cached.
template <typename P>
struct PrimitiveEntry {
  typename P::primitive_desc pd;
  P primitive;
};

// The primitive cached under `key`, made the first time from the
// descriptor `make_pd` returns (checked, naming `what`).
template <typename P>
PrimitiveEntry<P>& CachedPrimitive(const std::string& key, const char* what,
                                   const std::function<typename P::primitive_desc()>& make_pd) {
  return GetPrimitiveCache().GetOrCreate<PrimitiveEntry<P>>(key, [&] {
    PrimitiveEntry<P> entry;
    DnnlCheck(what, [&] {
      entry.pd = make_pd();
      entry.primitive = P(entry.pd);
    });
    return entry;
  });
}

// Runs `primitive` on `args` to completion (checked, naming `what`); an
// output made in the primitive's own layout (`produced`, from
// OutputInPrimitiveLayout) is reordered back into `user` first.
void Execute(const char* what, const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args,
             const dnnl::memory& produced = dnnl::memory(), const dnnl::memory& user = dnnl::memory());

}  // namespace ddp::cpu
