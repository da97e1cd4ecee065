// The families of FlashKDA's raw inputs (family_raw.cpp).
#pragma once
#include <memory>

#include "inputs/family.hpp"

namespace chunkinv {

std::unique_ptr<Family> make_kda_family();
std::unique_ptr<Family> make_collinear_family();

}  // namespace chunkinv
