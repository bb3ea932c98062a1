#include "hopper/MatchUtil.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace kiln::hopper {

using namespace mlir;
using namespace kiln::tile;

int argOf(ViewOp v, KernelOp k) {
  auto ba = dyn_cast<BlockArgument>(v.getTensor());
  if (!ba || ba.getOwner() != &k.getBody().front()) return -1;
  return int(ba.getArgNumber());
}

bool isConstIndex(Value v, int64_t c) {
  auto op = v.getDefiningOp<arith::ConstantIndexOp>();
  return op && op.value() == c;
}

bool isTileCount(Value count, KernelOp k, unsigned arg, unsigned dim, int64_t tile) {
  TensorArgType t = k.getArgType(arg);
  auto dimIs = [&](Value v) {
    if (auto d = v.getDefiningOp<DimOp>()) return !t.getDimSymbol(dim).empty() && d.getSymbol() == t.getDimSymbol(dim);
    return t.getDimSymbol(dim).empty() && isConstIndex(v, t.getDimConstant(dim));
  };
  if (auto c = count.getDefiningOp<arith::ConstantIndexOp>()) {
    int64_t kc = t.getDimConstant(dim);
    return t.getDimSymbol(dim).empty() && kc >= 0 && c.value() == (kc + tile - 1) / tile;
  }
  if (tile == 1 && dimIs(count)) return true;
  auto div = count.getDefiningOp<arith::CeilDivSIOp>();
  return div && isConstIndex(div.getRhs(), tile) && dimIs(div.getLhs());
}

bool matchGridLoopStore(KernelOp k, unsigned dims, GridLoopStore& out, std::string& why, unsigned maxStores,
                        bool windows) {
  SmallVector<GridOp> grids(k.getBody().front().getOps<GridOp>());
  if (grids.size() != 1) return why = "the kernel has no single tile.grid", false;
  out.grid = grids[0];
  // The twins read and write whole tensors by TMA boxes and plain tile coordinates: a
  // window's run-time start and bound would be ignored there, so a windowed view is refused
  // unless the caller checks the windows itself (`windows`).
  bool windowed = false;
  k.walk([&](ViewOp v) { windowed |= v.hasWindow(); });
  if (windowed && !windows) return why = "a view narrows a dim to a window (Tensor::window)", false;
  Block& body = out.grid.getBody().front();
  if (body.getNumArguments() != dims)
    return why = dims == 2 ? "the tile.grid is not two-dimensional" : "the tile.grid is not three-dimensional", false;
  SmallVector<LoopOp> loops(body.getOps<LoopOp>());
  SmallVector<StoreOp> stores(body.getOps<StoreOp>());
  if (loops.size() != 1 || stores.empty() || stores.size() > maxStores)
    return why = maxStores == 1 ? "the grid body has not exactly one loop and one store"
                                : "the grid body has not exactly one loop and 1 to " + std::to_string(maxStores) + " stores",
           false;
  out.loop = loops[0];
  out.store = stores[0];
  out.more.assign(stores.begin() + 1, stores.end());
  return true;
}

} // namespace kiln::hopper
