// The bytes a rank sends, by kind of collective, counted as ring
// algorithms send them: the volumes nccl-tests' bus bandwidth counts, the
// same whatever the backend. Of a buffer of S bytes among N ranks, an
// all-reduce sends 2(N-1)/N S, a reduce-scatter (of its world-sized input)
// and an all-gather (into its world-sized output) (N-1)/N S, a broadcast
// (N-1)/N S (a pipelined ring: every rank but one forwards it). ZeRO's
// promise in bytes (the paper's 1.5x DDP's volume at stage 3) is read here.
#pragma once

#include <cstdint>

namespace ddp {

struct Traffic {
  int64_t all_reduce = 0, reduce_scatter = 0, all_gather = 0, broadcast = 0;

  int64_t total() const { return all_reduce + reduce_scatter + all_gather + broadcast; }
  Traffic operator-(const Traffic& o) const {
    return {all_reduce - o.all_reduce, reduce_scatter - o.reduce_scatter, all_gather - o.all_gather,
            broadcast - o.broadcast};
  }
  Traffic& operator+=(const Traffic& o) {
    all_reduce += o.all_reduce;
    reduce_scatter += o.reduce_scatter;
    all_gather += o.all_gather;
    broadcast += o.broadcast;
    return *this;
  }
  bool operator==(const Traffic& o) const {
    return all_reduce == o.all_reduce && reduce_scatter == o.reduce_scatter && all_gather == o.all_gather &&
           broadcast == o.broadcast;
  }
};

// What a ring moves of `bytes` among `world` ranks: 2(N-1)/N S for an
// all-reduce (`all_reduce`), else (N-1)/N S; 0 on one rank.
inline int64_t RingBytes(int64_t bytes, int world, bool all_reduce) {
  if (world <= 1) return 0;
  return (all_reduce ? 2 : 1) * bytes * (world - 1) / world;
}

}  // namespace ddp
