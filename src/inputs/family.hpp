// Input families (SPEC §4): named generators of samples, each with its own
// parameters as axes. A configuration is one point of the axis grid.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "inputs/sample.hpp"

namespace chunkinv {

struct Configuration {
  std::string family;
  int chunk = 16;
  int dim = 128;
  nlohmann::json params = nlohmann::json::object();  // the family's own axes, defaults filled in

  // {"family", "chunk", "dim", <params>...}: the axes of a report entry (without "path").
  nlohmann::json axes() const;
  bool operator==(const Configuration& o) const { return axes() == o.axes(); }
};

// How the device draws a generated family's samples (inputs/device_families.cu),
// bit for bit as the family's make() draws them on the CPU.
struct DeviceDraw {
  enum class Kind { kFloor, kModelLike, kWeakDecayCorrelated };
  Kind kind = Kind::kFloor;
  double gate = 0.0;     // decay_floor (floor, model_like) or log_decay (weak_decay_correlated)
  double beta = 0.0;     // weak_decay_correlated's constant beta
  bool channel = false;  // per-channel gates: d values of g per token, even at d = 1
};

struct FamilyParam {
  std::string name;
  nlohmann::json default_value;  // null: no default (the parameter is optional)
  std::string help;
};

class Family {
 public:
  virtual ~Family() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual std::vector<FamilyParam> params() const = 0;
  // Throws UsageError naming the culprit when the configuration is invalid.
  virtual void validate(const Configuration& c) const;
  // Sample `index` of `seed`: a pure function of its arguments.
  virtual Sample make(const Configuration& c, uint64_t seed, uint64_t index) const = 0;
  // Families backed by data hold a finite number of samples.
  virtual std::optional<uint64_t> available_samples(const Configuration&) const { return std::nullopt; }
  // Axes the family takes from its data (e.g. chunk and dim of a tensor file).
  virtual void complete(Configuration&) const {}
  // The family's device form (the GPU pipeline's source stage) for c, where
  // it has one; else nullopt and, where `why` is given, one line saying why.
  virtual std::optional<DeviceDraw> device_draw(const Configuration& c, std::string* why) const;
};

// A family without a device form says why in its device_draw: `reason` into
// *why where given (family.cpp).
std::nullopt_t no_device_form(std::string* why, std::string reason);

// The device form of c's family, by the registry (device_draw); nullopt with
// why for a family without one, or an unknown family.
std::optional<DeviceDraw> device_draw_of(const Configuration& c, std::string* why);

// The name by value: a reference to a temporary string would read, to
// g++ 13, as a result that may dangle (-Wdangling-reference).
const Family& find_family(std::string_view name);  // throws UsageError with a suggestion
std::vector<std::string> family_names();

// Helpers shared by the generated families.
// Row `row` of a random key: d normals from stream kKeys, L2-normalised in
// FP64, each entry rounded to BF16 (round to nearest even).
void random_unit_key(uint64_t seed, uint64_t index, int row, int dim, double* out);

}  // namespace chunkinv
