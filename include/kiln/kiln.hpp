#pragma once
// kiln: tile-granularity GPU kernels from C++. The umbrella header.
#include "kiln/catalogue.hpp"
#include "kiln/dsl.hpp"
#include "kiln/dtype.hpp"
#include "kiln/error.hpp"
#include "kiln/handwritten.hpp"
#include "kiln/kernel.hpp"
#include "kiln/profile.hpp"
#include "kiln/reference.hpp"
#include "kiln/runtime.hpp"
#include "kiln/testing.hpp"
#include "kiln/tensor.hpp"
#include "kiln/verify.hpp"
