// Non-full run container "fullest_first" (TCMalloc's central free lists keep
// non-empty spans in occupancy buckets and allocate from the fullest): eight
// intrusive LIFO lists of runs, one per occupancy bucket, and a bit mask of
// the buckets that are not empty.
//
// Policy: a run from the fullest non-empty bucket, the one that most recently
// entered it (inserted, or moved there by touched). Allocating from nearly
// full runs lets nearly empty ones drain and go back to the arena; buckets
// instead of an exact order make every call O(1). As in TCMalloc, a run's
// bucket is 8 - bit_width(allocated regions), clamped to 0..7: bucket 7 holds
// runs with 1 region allocated (or none: a new run between its insert and
// its first allocation), 6 those with 2-3, 5 with 4-7, ... and bucket 0
// every run with 128 or more. The buckets are fine where a run is about to
// drain and coarse where runs are nearly full; sorted_by_free is the exact
// order, for comparison. The pick is sticky: allocating only fills it
// further, which keeps it in its bucket or moves it to the front of a fuller
// one.
// Complexity: insert, erase, pick O(1) (pick: the lowest set bit of the
// mask); touched O(1): it recomputes the bucket and moves the run only when
// its occupancy crossed a power of two; check O(n). Memory: the three words
// of the 24-byte ContainerHook (prev, next, bucket); ten words per bin (eight
// list heads, the mask, size). The bucket reads the run's free count and its
// bin's regions per run through its traits.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "containers/container.h"
#include "platform/fatal.h"
#include "structures/intrusive_list.h"

namespace runsel {

template <OccupancyAccess Traits>
class FullestFirstRuns {
 public:
  using Node = typename Traits::Node;

  static constexpr std::size_t kBuckets = 8;

  static std::size_t bucket_for(const Node* run) {
    const std::uint32_t allocated = Traits::regions(run) - Traits::free_regions(run);
    const std::size_t width = static_cast<std::size_t>(std::bit_width(allocated));
    return width >= kBuckets ? 0 : width == 0 ? kBuckets - 1 : kBuckets - width;
  }

  void insert(Node* run) {
    push(run, bucket_for(run));
    ++size_;
  }

  void erase(Node* run) {
    unlink(run);  // and its links cleared: a stale link to it finds no back link
    --size_;
  }

  Node* pick() const {
    return nonempty_ == 0 ? nullptr : lists_[std::countr_zero(nonempty_)].front();
  }

  void touched(Node* run) {
    const std::size_t bucket = bucket_for(run);
    if (bucket == links(run).bucket) return;
    unlink(run);
    push(run, bucket);
  }

  std::size_t size() const { return size_; }

  // Invariants:
  // - A bucket's bit is set exactly when its list is not empty.
  // - Every list is doubly linked from its head (the head's prev null) and
  //   ends at null.
  // - Every run on list b records bucket b, and its occupancy maps to b
  //   (touched was called after every change).
  // - Exactly size() runs are on the lists.
  bool check(const char** why) const {
    std::size_t count = 0;
    for (std::size_t bucket = 0; bucket < kBuckets; ++bucket) {
      const bool marked = (nonempty_ >> bucket) & 1;
      if (marked != !lists_[bucket].empty()) {
        return check_failed(why, "a bucket's bit disagrees with its list");
      }
      if (!lists_[bucket].check(size_ - count, &count, why)) return false;
      for (Node* run = lists_[bucket].front(); run != nullptr; run = List::next(run)) {
        if (links(run).bucket != bucket) return check_failed(why, "a run records another bucket");
        if (bucket_for(run) != bucket) {
          return check_failed(why, "a run is not in the bucket of its occupancy");
        }
      }
    }
    if (nonempty_ >> kBuckets != 0) return check_failed(why, "a bit set beyond the buckets");
    if (count != size_) return check_failed(why, "fewer runs reachable than size()");
    return true;
  }

 private:
  static BucketLinks<Node>& links(Node* run) { return Traits::hook(run).buckets; }
  // The lists' Rep: the bucket links, verified (structures/verified_links.h).
  struct BucketList {
    static ListLinks<Node>& links(Node* run) { return Traits::hook(run).buckets.list; }
    static bool linked(const Node* run, const Node* neighbour) {
      return Traits::linked(run, neighbour);
    }
  };
  using List = IntrusiveList<Node, BucketList>;

  void push(Node* run, std::size_t bucket) {
    links(run).bucket = bucket;
    lists_[bucket].push_front(run);
    nonempty_ |= 1u << bucket;
  }

  // The bucket the run records must be one; the list verifies both links and
  // their back links (the head of that bucket when it has no prev) before it
  // unlinks.
  void unlink(Node* run) {
    const std::size_t bucket = links(run).bucket;
    if (kVerifyLinks && bucket >= kBuckets) [[unlikely]]
      container_links_damaged(run);
    lists_[bucket].erase(run);
    if (lists_[bucket].empty()) nonempty_ &= ~(1u << bucket);
  }

  List lists_[kBuckets] = {};   // lists_[0]: the fullest runs
  std::uint32_t nonempty_ = 0;  // bit b: lists_[b] is not empty
  std::size_t size_ = 0;
};

}  // namespace runsel
