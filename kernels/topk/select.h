// SPDX-License-Identifier: BSD-3-Clause
/* Exact top-k selection and bitmap helpers shared by the sparsifying codecs (topk, fft_topk).
 *
 * Positions 0..n-1 carry 31-bit keys (uint32_t: |x| bits of floats) or 63-bit keys (uint64_t:
 * |x| bits of doubles); larger = more important (key 0 may mean "never keep" to the caller,
 * it is an ordinary key here). The k positions kept are the k largest keys, ties broken by
 * the smaller position: exactly
 *     { i : key(i) > T }  plus the first `need` positions (in index order) with key(i) == T.
 * Found by a radix select: one histogram pass over every key's top 11 bits (31-bit keys: bits
 * 30..20, 63-bit keys: 62..52, the exponent of a double), one pass that gathers the keys of the
 * threshold bucket per segment, then histograms of the next 11 bits (fewer for the last level)
 * over those candidates only: 11 + 11 + 9 bits for 31-bit keys, 11 + 11 x 4 + 8 for 63-bit keys. Every count is an integer sum over fixed segments, so the
 * result (and everything a caller writes from it) is the same for any thread count.
 *
 * Positions are processed in segments of kSegWords 64-bit bitmap words; a caller's write pass
 * visits segment s knowing how many values come before it (off[s]) and how many ties it
 * takes (take[s]), so segments are independent. */
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace compmpi::sparse {

inline constexpr size_t kSegWords = 1024;                /* 65536 positions per segment */
inline constexpr size_t kSegPos = kSegWords * 64;
inline constexpr size_t kParallelMin = 1 << 16;          /* positions below which one thread works */

inline size_t words_of(size_t n) { return (n + 63) / 64; }
inline size_t segs_of(size_t n) { return (n + kSegPos - 1) / kSegPos; }

/* k = ceil((1 - theta) * n), exactly, with theta taken to 7 decimal digits (the precision of
 * the fp32 setting, so 0.85f keeps exactly 15% and 0.9f exactly 10%); clamped to [0, n].
 * theta must be finite in [0, 1]. */
inline uint64_t keep_count(size_t n, double theta) {
    constexpr int64_t kScale = 10000000;
    int64_t t = std::llround(theta * static_cast<double>(kScale));
    t = std::clamp<int64_t>(t, 0, kScale);
    const unsigned __int128 num = static_cast<unsigned __int128>(n) * static_cast<uint64_t>(kScale - t);
    return static_cast<uint64_t>((num + kScale - 1) / kScale);
}

/* K: the key type (uint32_t: 31-bit keys, uint64_t: 63-bit keys). */
template <class K> struct SelectionT {
    uint64_t k = 0;
    K T = 0;                     /* keep key > T, plus take[s] ties (key == T) in segment s */
    bool all_above = false;      /* k == 0: nothing kept (T is then meaningless) */
    uint64_t nonfinite = 0;      /* keys of NaN/Inf |x| bits (>= KeyBits<K>::kNonfinite); counted unless k == 0 */
    std::vector<uint64_t> take;  /* per segment: ties kept */
    std::vector<uint64_t> kept;  /* per segment: positions kept */
    std::vector<uint64_t> off;   /* per segment: kept positions before it */
};
using Selection = SelectionT<uint32_t>;
using Selection64 = SelectionT<uint64_t>;

/* Key widths: bits used, and the smallest key of a NaN/Inf (|x| bits of the element type). */
template <class K> struct KeyBits;
template <> struct KeyBits<uint32_t> {
    static constexpr int kBits = 31;
    static constexpr uint32_t kNonfinite = 0x7F800000u;
};
template <> struct KeyBits<uint64_t> {
    static constexpr int kBits = 63;
    static constexpr uint64_t kNonfinite = 0x7FF0000000000000ull;
};

/* Keep the lowest *rem set bits of eq; *rem decreases by the number kept. */
inline uint64_t take_ties(uint64_t eq, uint64_t *rem) {
    const uint64_t pc = static_cast<uint64_t>(__builtin_popcountll(eq));
    if (pc <= *rem) {
        *rem -= pc;
        return eq;
    }
    uint64_t t = 0;
    while (*rem) {
        const uint64_t low = eq & (~eq + 1);
        t |= low;
        eq ^= low;
        --*rem;
    }
    return t;
}

/* Popcounts of little-endian u64 bitmap words at any alignment: the total of nw words, and
 * (rank variant) rank[w] = set bits before word w for w <= nw. The hardware POPCNT versions
 * are used where the CPU has AVX2 (every such CPU has POPCNT); same results either way. */
#define COMPMPI_BITMAP_COUNTERS(SUFFIX, ATTR)                                                   \
    ATTR inline uint64_t popcount_words_##SUFFIX(const uint8_t *p, size_t nw) {                  \
        uint64_t c = 0;                                                                         \
        for (size_t w = 0; w < nw; ++w) {                                                       \
            uint64_t v;                                                                         \
            std::memcpy(&v, p + 8 * w, 8);                                                      \
            c += static_cast<uint64_t>(__builtin_popcountll(v));                                \
        }                                                                                       \
        return c;                                                                               \
    }                                                                                           \
    ATTR inline uint64_t rank_words_##SUFFIX(const uint8_t *p, size_t nw, uint64_t *rank) {      \
        uint64_t c = 0;                                                                         \
        for (size_t w = 0; w < nw; ++w) {                                                       \
            uint64_t v;                                                                         \
            std::memcpy(&v, p + 8 * w, 8);                                                      \
            rank[w] = c;                                                                        \
            c += static_cast<uint64_t>(__builtin_popcountll(v));                                \
        }                                                                                       \
        rank[nw] = c;                                                                           \
        return c;                                                                               \
    }
COMPMPI_BITMAP_COUNTERS(sw, )
COMPMPI_BITMAP_COUNTERS(hw, __attribute__((target("popcnt"))))
#undef COMPMPI_BITMAP_COUNTERS

inline uint64_t popcount_words(const uint8_t *p, size_t nw, bool hw) {
    return hw ? popcount_words_hw(p, nw) : popcount_words_sw(p, nw);
}
inline uint64_t rank_words(const uint8_t *p, size_t nw, uint64_t *rank, bool hw) {
    return hw ? rank_words_hw(p, nw, rank) : rank_words_sw(p, nw, rank);
}

namespace detail {
/* Bucket holding the need-th largest key among counts h[0..nb) (scanning from the top);
 * *need becomes the rank inside that bucket. */
inline uint32_t find_bucket(const uint64_t *h, uint32_t nb, uint64_t *need) {
    for (uint32_t b = nb; b-- > 0;) {
        if (h[b] >= *need) return b;
        *need -= h[b];
    }
    return 0; /* unreachable when need <= total */
}
}  // namespace detail

/* key(i) for i in [0, n): uint32_t below 2^31 or uint64_t below 2^63. Stops after the first
 * pass if any key is >= KeyBits<K>::kNonfinite (sel->nonfinite > 0): NaN/Inf when keys are |x|
 * bits. */
inline constexpr uint32_t kLevel1Buckets = 2048; /* the key's top 11 bits */
/* the shift of the level-1 bucket: key >> kLevel1Shift<K> */
template <class K> inline constexpr int kLevel1Shift = KeyBits<K>::kBits - 11;

/* h1_pre (optional): a histogram of key >> kLevel1Shift<K> over all n keys (kLevel1Buckets
 * counts) that the caller built while producing the keys; skips the first pass. */
template <class KeyFn, class K = std::invoke_result_t<KeyFn &, size_t>>
void select_topk(size_t n, uint64_t k, KeyFn key, int threads, SelectionT<K> *sel, const uint64_t *h1_pre = nullptr) {
    constexpr int s1 = kLevel1Shift<K>;
    const size_t nseg = segs_of(n);
    sel->k = k;
    sel->T = 0;
    sel->all_above = k == 0;
    sel->nonfinite = 0;
    sel->take.assign(nseg, 0);
    sel->kept.assign(nseg, 0);
    sel->off.assign(nseg, 0);
    if (k == 0 || n == 0) return;
    const bool par = n >= kParallelMin && threads > 1;

    /* level 1: histogram of the top 11 key bits */
    constexpr uint32_t kB1 = kLevel1Buckets;
    std::vector<uint64_t> h1(kB1, 0);
    if (h1_pre) std::copy(h1_pre, h1_pre + kB1, h1.begin());
    if (!h1_pre) {
#pragma omp parallel num_threads(threads) if (par)
        {
            std::vector<uint64_t> local(kB1, 0);
            std::vector<uint32_t> a(kB1), b(kB1);
#pragma omp for schedule(static)
            for (size_t s = 0; s < nseg; ++s) {
                std::fill(a.begin(), a.end(), 0u);
                std::fill(b.begin(), b.end(), 0u);
                const size_t lo = s * kSegPos, hi = std::min(n, lo + kSegPos);
                size_t i = lo;
                for (; i + 2 <= hi; i += 2) { /* two histograms: neighbours often share a bucket */
                    ++a[key(i) >> s1];
                    ++b[key(i + 1) >> s1];
                }
                if (i < hi) ++a[key(i) >> s1];
                for (uint32_t j = 0; j < kB1; ++j) local[j] += a[j] + b[j];
            }
#pragma omp critical(compmpi_select_h1)
            for (uint32_t j = 0; j < kB1; ++j) h1[j] += local[j];
        }
    }
    for (uint32_t j = static_cast<uint32_t>(KeyBits<K>::kNonfinite >> s1); j < kB1; ++j) sel->nonfinite += h1[j];
    if (sel->nonfinite) return;
    uint64_t need = k;
    const uint32_t b1 = detail::find_bucket(h1.data(), kB1, &need);

    /* gather the keys of bucket b1 per segment; count the keys above it */
    std::vector<std::vector<K>> cand(nseg);
    std::vector<uint64_t> above(nseg, 0);
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (size_t s = 0; s < nseg; ++s) {
        const size_t lo = s * kSegPos, hi = std::min(n, lo + kSegPos);
        uint64_t gt = 0;
        std::vector<K> &c = cand[s];
        for (size_t i = lo; i < hi; ++i) {
            const K kk = key(i);
            const uint32_t top = static_cast<uint32_t>(kk >> s1);
            gt += top > b1;
            if (top == b1) c.push_back(kk);
        }
        above[s] = gt;
    }

    /* the next levels over the candidates only: 11 bits at a time, the last one what is left;
     * T's bits above `shift` are decided (prefix), candidates outside the prefix are skipped */
    K T = static_cast<K>(b1);
    for (int shift = s1; shift > 0;) {
        const int width = shift > 11 ? 11 : shift;
        shift -= width;
        const uint32_t nb = 1u << width;
        std::vector<uint64_t> h(nb, 0);
        for (const auto &c : cand)
            for (K kk : c)
                if ((kk >> (shift + width)) == T) ++h[static_cast<uint32_t>(kk >> shift) & (nb - 1)];
        T = static_cast<K>((T << width) | detail::find_bucket(h.data(), nb, &need));
    }
    sel->T = T;

    /* per segment: keys above T, ties, and the ties it may take (lowest positions first) */
    uint64_t ties_left = need, total = 0;
    for (size_t s = 0; s < nseg; ++s) {
        uint64_t gt = above[s], eq = 0;
        for (K kk : cand[s]) {
            gt += kk > T;
            eq += kk == T;
        }
        const uint64_t t = std::min(eq, ties_left);
        ties_left -= t;
        sel->take[s] = t;
        sel->kept[s] = gt + t;
        sel->off[s] = total;
        total += gt + t;
    }
}

}  // namespace compmpi::sparse
