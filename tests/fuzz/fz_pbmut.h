// fz_pbmut.h — a protobuf-aware mutation of a raw ONNX model, in place: one scalar leaf
// (a varint, a fixed32/fixed64, a byte of a bytes field that is not itself a message) changes
// and the framing stays intact, so the mutated model still parses. Varints are rewritten in
// their own length (protobuf accepts a non-minimal varint), which lets any int64 fit a 10-byte
// slot and small values fit every slot. Used by LLVMFuzzerCustomMutator for 'R' inputs.
#ifndef FBX_TESTS_FUZZ_FZ_PBMUT_H
#define FBX_TESTS_FUZZ_FZ_PBMUT_H

#include <stddef.h>
#include <stdint.h>

// Mutate p[0..n) in place with the pseudo-random stream of `seed`. 1 if a leaf was changed,
// 0 if the bytes hold no parsable leaf (the caller then mutates another way).
int fz_pbmut(uint8_t *p, size_t n, unsigned seed);

#endif  // FBX_TESTS_FUZZ_FZ_PBMUT_H
