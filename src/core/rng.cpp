#include "core/rng.hpp"

#include "core/philox.hpp"

namespace chunkinv {

std::array<uint32_t, 4> Rng::block(uint64_t index) const {
  const philox::Block b = philox::block(seed_, sample_, stream_, index);
  return {b.v[0], b.v[1], b.v[2], b.v[3]};
}

double Rng::uniform(uint64_t index) const {
  const philox::Block b = philox::block(seed_, sample_, stream_, index);
  return philox::to_unit(b.v[0], b.v[1]);
}

std::pair<double, double> Rng::normal_pair(uint64_t pair) const {
  const philox::NormalPair p = philox::normal_pair(seed_, sample_, stream_, pair);
  return {p.x, p.y};
}

double Rng::normal(uint64_t index) const { return philox::normal(seed_, sample_, stream_, index); }

}  // namespace chunkinv
