// Writes gemmlowp_golden.txt: reference outputs of gemmlowp's scalar
// fixed-point math (Debian's libgemmlowp-dev headers) for the unit tests of
// fixed_point/gemmlowp.rs. Regenerate with:
//   g++ -O1 -fwrapv -I/usr/include/gemmlowp gemmlowp_golden.cc -o /tmp/golden
//   /tmp/golden > gemmlowp_golden.txt
#include <cstdint>
#include <cstdio>
#include <vector>

#include "fixedpoint/fixedpoint.h"

using gemmlowp::FixedPoint;

static uint64_t state = 0x9E3779B97F4A7C15ull;
static uint32_t next() {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<uint32_t>(state >> 32);
}

template <typename R>
std::vector<R> samples(bool non_negative, bool non_positive, int count) {
  std::vector<R> v;
  const R edges[] = {0, 1, -1, 2, -2, std::numeric_limits<R>::max(),
                     std::numeric_limits<R>::min(),
                     static_cast<R>(std::numeric_limits<R>::max() / 2),
                     static_cast<R>(std::numeric_limits<R>::min() / 2)};
  for (R e : edges) v.push_back(e);
  for (int i = 0; i < count; ++i) {
    uint32_t r = next();
    // Spread magnitudes: shift right by a random amount.
    int shift = next() % (8 * sizeof(R));
    R x = static_cast<R>(static_cast<int32_t>(r) >> (shift + 32 - 8 * sizeof(R)));
    v.push_back(x);
  }
  std::vector<R> out;
  for (R x : v) {
    if (non_negative && x < 0) x = (x == std::numeric_limits<R>::min()) ? 0 : -x;
    if (non_positive && x > 0) x = -x;
    out.push_back(x);
  }
  return out;
}

#define EMIT(name, type, k, expr)                                   \
  printf("%s %s %d %d %d\n", name, type, k, static_cast<int>(x),   \
         static_cast<int>(expr))

template <typename R, int K>
void emit_all(const char* type, int count) {
  using F = FixedPoint<R, K>;
  for (R x : samples<R>(false, true, count))
    EMIT("exp_on_negative_values", type, K,
         gemmlowp::exp_on_negative_values(F::FromRaw(x)).raw());
  for (R x : samples<R>(false, false, count))
    EMIT("logistic", type, K, gemmlowp::logistic(F::FromRaw(x)).raw());
  for (R x : samples<R>(false, false, count))
    EMIT("tanh", type, K, gemmlowp::tanh(F::FromRaw(x)).raw());
}

template <typename R>
void emit_q0(const char* type, int count) {
  using F0 = FixedPoint<R, 0>;
  for (R x : samples<R>(true, false, count))
    EMIT("one_over_one_plus_x_for_x_in_0_1", type, 0,
         gemmlowp::one_over_one_plus_x_for_x_in_0_1(F0::FromRaw(x)).raw());
  for (R x : samples<R>(true, false, count))
    EMIT("one_minus_x_over_one_plus_x_for_x_in_0_1", type, 0,
         gemmlowp::one_minus_x_over_one_plus_x_for_x_in_0_1(F0::FromRaw(x))
             .raw());
  for (R y : samples<R>(false, true, count)) {
    const R x = static_cast<R>(y / 4 == 0 ? -1 : y / 4);  // in [-1/4, 0)
    EMIT("exp_on_interval_between_negative_one_quarter_and_0_excl", type, 0,
         gemmlowp::exp_on_interval_between_negative_one_quarter_and_0_excl(
             F0::FromRaw(x))
             .raw());
  }
}

int main() {
  const int n = 60;
  emit_q0<int32_t>("i32", n);
  emit_q0<int16_t>("i16", n);
  emit_all<int32_t, 0>("i32", n);
  emit_all<int32_t, 4>("i32", n);
  emit_all<int32_t, 5>("i32", n);
  emit_all<int32_t, 6>("i32", n);
  emit_all<int32_t, 12>("i32", n);
  emit_all<int16_t, 0>("i16", n);
  emit_all<int16_t, 3>("i16", n);
  emit_all<int16_t, 6>("i16", n);
  return 0;
}
