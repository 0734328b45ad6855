// The heap's two fixed sizes, defined once: a page (4 KiB) and a chunk
// (1 MiB, aligned to its size). The arena lays chunks out in pages
// (arena/layout.h, arena/chunk.h); the chunk registry keys its map by chunk
// (chunk_registry.h).
#pragma once

#include <cstddef>

namespace runsel {

inline constexpr std::size_t kPageShift = 12;
inline constexpr std::size_t kPageSize = std::size_t{1} << kPageShift;
inline constexpr std::size_t kPageMask = kPageSize - 1;
inline constexpr std::size_t kChunkShift = 20;
inline constexpr std::size_t kChunkSize = std::size_t{1} << kChunkShift;
inline constexpr std::size_t kChunkMask = kChunkSize - 1;
inline constexpr std::size_t kPagesPerChunk = kChunkSize / kPageSize;

}  // namespace runsel
