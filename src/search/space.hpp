// What `chunkinv search` searches over: the inputs a family's constraints
// allow, written as an unconstrained vector x in R^n so that every x is a
// valid sample (docs/search.md "Parametrisation"). Today: normalised keys
// and per-token gates. Raw keys (FlashKDA's interface) and per-channel gates
// (SPEC §1) are further values of KeyForm and GateForm: each adds its block
// of coordinates and its decode step, nothing else changes.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inputs/sample.hpp"

namespace chunkinv {

enum class KeyForm { kNormalised };  // planned: kRaw (un-normalised BF16 keys, FlashKDA's interface)
enum class GateForm { kPerToken };   // planned: kPerChannel (g of C x d, SPEC §1)

struct SearchSpace {
  int chunk = 16;            // C, 2..64
  int dim = 128;             // d
  double decay_floor = -5;   // g in [decay_floor, 0): the model_like family's bound
  KeyForm keys = KeyForm::kNormalised;
  GateForm gates = GateForm::kPerToken;

  // A shared key direction w with a weight a_r per row: row r's key is the
  // direction of a_r w + z_r. Every key configuration is still reachable
  // (w = 0), and collinear keys, the structure of the known failures, are
  // a few coordinates away (a_r large) instead of C*d coordinates moving
  // together. Off: the key of row r is the direction of z_r alone.
  bool shared_direction = true;

  // Layout of x: C*d row coordinates z (row-major); with a shared
  // direction, d coordinates of w and C weights a; then C gate logits u,
  // then C beta logits v.
  size_t key_size() const { return static_cast<size_t>(chunk) * static_cast<size_t>(dim); }
  size_t shared_offset() const { return key_size(); }
  size_t weight_offset() const { return shared_offset() + (shared_direction ? static_cast<size_t>(dim) : 0); }
  size_t gate_offset() const { return weight_offset() + (shared_direction ? static_cast<size_t>(chunk) : 0); }
  size_t beta_offset() const { return gate_offset() + static_cast<size_t>(chunk); }
  size_t size() const { return beta_offset() + static_cast<size_t>(chunk); }

  // x -> sample, valid by construction:
  //   key row r = bf16(y_r / |y_r|), y_r = a_r w + z_r (or z_r)  (a zero y_r becomes e_0),
  //   g_t = decay_floor * sigmoid(clamp(u_t, -30, 30))  in [decay_floor, 0),
  //   beta_t = sigmoid(clamp(v_t, -30, 30))              in (0, 1).
  // The clamp keeps g < 0 and beta < 1 in double (sigmoid(30) = 1 - 9.4e-14);
  // beyond it the objective is flat. detmath's sigmoid: the same bits everywhere.
  Sample decode(std::span<const double> x) const;
  // Throws UsageError naming the culprit (chunk, dim, decay_floor).
  void validate() const;
  nlohmann::json to_json() const;  // {"chunk", "dim", "decay_floor", "keys", "gates", "shared_direction", "size"}
};

std::string key_form_name(KeyForm k);
std::string gate_form_name(GateForm g);
KeyForm parse_key_form(const std::string& s);    // UsageError for raw (planned) or unknown
GateForm parse_gate_form(const std::string& s);  // UsageError for per_channel (planned) or unknown

}  // namespace chunkinv
