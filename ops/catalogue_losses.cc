// The catalogue's entries for linear layers, activations, losses, masks and comparisons (ops/catalogue.h).
#include "ops/catalogue_internal.h"

namespace streamgrad {
namespace catalogue_internal {

void losses_activations(Catalogue& c) { (void)c; }

}  // namespace catalogue_internal
}  // namespace streamgrad
