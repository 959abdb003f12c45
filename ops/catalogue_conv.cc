// The catalogue's entries for convolution, pooling and normalisation (ops/catalogue.h).
#include "ops/catalogue_internal.h"

namespace streamgrad {
namespace catalogue_internal {

void conv_pool_norm(Catalogue& c) { (void)c; }

}  // namespace catalogue_internal
}  // namespace streamgrad
