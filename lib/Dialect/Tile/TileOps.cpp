#include "Dialect/Tile/TileDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace kiln::tile;

#define GET_OP_CLASSES
#include "Dialect/Tile/TileOps.cpp.inc"

static std::string shapeStr(ArrayRef<int64_t> s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

//===----------------------------------------------------------------------===//
// tile.kernel @name(in %A : T, out %C : T) { ... }
//===----------------------------------------------------------------------===//

ParseResult KernelOp::parse(OpAsmParser& p, OperationState& st) {
  StringAttr name;
  if (p.parseSymbolName(name, SymbolTable::getSymbolAttrName(), st.attributes))
    return failure();
  SmallVector<OpAsmParser::Argument> args;
  SmallVector<Attribute> names;
  SmallVector<bool> outputs;
  auto parseArg = [&]() -> ParseResult {
    StringRef role;
    if (p.parseKeyword(&role)) return failure();
    if (role != "in" && role != "out")
      return p.emitError(p.getCurrentLocation(), "expected 'in' or 'out' before argument");
    OpAsmParser::Argument arg;
    SMLoc at = p.getCurrentLocation();
    if (p.parseArgument(arg, /*allowType=*/true)) return failure();
    // The SSA name becomes the argument's name in launch errors: it must be a word.
    StringRef word = arg.ssaName.name.drop_front();
    if (word.empty() || !(llvm::isAlpha(word[0]) || word[0] == '_'))
      return p.emitError(at, "argument name '") << word << "' must start with a letter or '_'";
    names.push_back(p.getBuilder().getStringAttr(arg.ssaName.name.drop_front()));
    outputs.push_back(role == "out");
    args.push_back(arg);
    return success();
  };
  if (p.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseArg) ||
      p.parseOptionalAttrDictWithKeyword(st.attributes))
    return failure();
  st.addAttribute("arg_names", p.getBuilder().getArrayAttr(names));
  st.addAttribute("outputs", p.getBuilder().getDenseBoolArrayAttr(outputs));
  Region* body = st.addRegion();
  if (p.parseRegion(*body, args)) return failure();
  KernelOp::ensureTerminator(*body, p.getBuilder(), st.location);
  return success();
}

void KernelOp::print(OpAsmPrinter& p) {
  p << " ";
  p.printSymbolName(getSymName());
  p << "(";
  for (unsigned i = 0; i < getNumArguments(); ++i) {
    if (i) p << ", ";
    p << (isOutput(i) ? "out " : "in ");
    p.printRegionArgument(getArgument(i));
  }
  p << ")";
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                     {getSymNameAttrName(), getArgNamesAttrName(),
                                      getOutputsAttrName()});
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false, /*printBlockTerminators=*/false);
}

void KernelOp::getAsmBlockArgumentNames(Region& region, OpAsmSetValueNameFn setName) {
  if (&region != &getBody()) return;
  for (unsigned i = 0; i < getNumArguments() && i < getArgNames().size(); ++i)
    setName(getArgument(i), getArgName(i));
}

std::optional<std::pair<unsigned, unsigned>> KernelOp::findSymbol(StringRef sym) {
  for (unsigned a = 0; a < getNumArguments(); ++a) {
    auto t = dyn_cast<TensorArgType>(getArgument(a).getType());
    if (!t) continue;
    for (unsigned d = 0; d < t.getRank(); ++d)
      if (!sym.empty() && t.getDimSymbol(d) == sym) return std::make_pair(a, d);
  }
  return std::nullopt;
}

LogicalResult KernelOp::verify() {
  size_t n = getBody().front().getNumArguments();
  if (getArgNames().size() != n || getOutputs().size() != n)
    return emitOpError("needs one name and one in/out role per argument");
  llvm::StringSet<> seen;
  for (unsigned i = 0; i < n; ++i) {
    if (!isa<TensorArgType>(getArgument(i).getType()))
      return emitOpError("argument '") << getArgName(i) << "' must be a !tile.tensor, got "
                                       << getArgument(i).getType();
    if (!seen.insert(getArgName(i)).second)
      return emitOpError("argument name '") << getArgName(i) << "' is used twice";
  }
  if (!llvm::is_contained(getOutputs(), true))
    return emitOpError("has no 'out' argument: a kernel must write something");
  if (auto pairs = getInPlace()) {
    if (pairs->size() % 2 != 0) return emitOpError("in_place needs (output, input) pairs of argument positions");
    for (size_t p = 0; p < pairs->size(); p += 2) {
      int64_t o = (*pairs)[p], i = (*pairs)[p + 1];
      if (o < 0 || i < 0 || o >= int64_t(n) || i >= int64_t(n))
        return emitOpError("in_place names argument #") << (o < 0 || o >= int64_t(n) ? o : i) << " of " << n;
      if (!isOutput(o) || isOutput(i))
        return emitOpError("in_place pairs an 'out' argument with an 'in' one; got '")
               << getArgName(o) << "' and '" << getArgName(i) << "'";
      for (size_t q = 0; q < p; q += 2)
        if ((*pairs)[q] == o && (*pairs)[q + 1] == i)
          return emitOpError("in_place lists '") << getArgName(o) << "' over '" << getArgName(i) << "' twice";
      if (getArgType(o) != getArgType(i))
        return emitOpError("'") << getArgName(o) << "' can never be the same memory as '" << getArgName(i)
                                << "': their types differ (" << getArgType(o) << " against " << getArgType(i) << ")";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// tile.dim
//===----------------------------------------------------------------------===//

void DimOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  setName(getResult(), getSymbol());
}

LogicalResult DimOp::verify() {
  if (getSymbol().empty()) return emitOpError("needs a symbol name");
  auto kernel = (*this)->getParentOfType<KernelOp>();
  if (!kernel) return emitOpError("must be inside a tile.kernel");
  if (!kernel.findSymbol(getSymbol()))
    return emitOpError("symbol '") << getSymbol() << "' is not a dim of any argument of @"
                                   << kernel.getSymName();
  return success();
}

//===----------------------------------------------------------------------===//
// tile.grid (%i, %j) in (%m, %n) { ... }
//===----------------------------------------------------------------------===//

void GridOp::build(OpBuilder& b, OperationState& st, ValueRange sizes) {
  st.addOperands(sizes);
  Region* body = st.addRegion();
  Block* block = new Block();
  body->push_back(block);
  for (Value s : sizes) block->addArgument(b.getIndexType(), s.getLoc());
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToEnd(block);
  b.create<YieldOp>(st.location);
}

ParseResult GridOp::parse(OpAsmParser& p, OperationState& st) {
  SmallVector<OpAsmParser::Argument> ivs;
  SmallVector<OpAsmParser::UnresolvedOperand> sizes;
  if (p.parseArgumentList(ivs, OpAsmParser::Delimiter::Paren) || p.parseKeyword("in") ||
      p.parseOperandList(sizes, OpAsmParser::Delimiter::Paren))
    return failure();
  if (ivs.size() != sizes.size())
    return p.emitError(p.getNameLoc(), "grid has ") << ivs.size() << " indices but "
                                                    << sizes.size() << " sizes";
  Type idx = p.getBuilder().getIndexType();
  for (auto& iv : ivs) iv.type = idx;
  if (p.resolveOperands(sizes, idx, st.operands) ||
      p.parseOptionalAttrDictWithKeyword(st.attributes))
    return failure();
  Region* body = st.addRegion();
  if (p.parseRegion(*body, ivs)) return failure();
  GridOp::ensureTerminator(*body, p.getBuilder(), st.location);
  return success();
}

void GridOp::print(OpAsmPrinter& p) {
  p << " (";
  llvm::interleaveComma(getBody().front().getArguments(), p,
                        [&](BlockArgument a) { p.printOperand(a); });
  p << ") in (" << getSizes() << ")";
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs());
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false, /*printBlockTerminators=*/false);
}

LogicalResult GridOp::verify() {
  size_t n = getSizes().size();
  if (n < 1 || n > 3) return emitOpError("grid must have 1, 2 or 3 dims, got ") << n;
  if (getBody().front().getNumArguments() != n)
    return emitOpError("body must take one index per grid dim");
  if (!cast<YieldOp>(getBody().front().getTerminator()).getValues().empty())
    return emitOpError("body yields values; a grid body returns nothing");
  return success();
}

//===----------------------------------------------------------------------===//
// %r = tile.loop %k to %n stages 4 carry(%c = %init : T) { ... }
//===----------------------------------------------------------------------===//

void LoopOp::build(OpBuilder& b, OperationState& st, Value count, ValueRange inits,
                   int64_t stages) {
  st.addOperands(count);
  st.addOperands(inits);
  st.addAttribute("stages", b.getI64IntegerAttr(stages));
  for (Value v : inits) st.addTypes(v.getType());
  Region* body = st.addRegion();
  Block* block = new Block();
  body->push_back(block);
  block->addArgument(b.getIndexType(), st.location);
  for (Value v : inits) block->addArgument(v.getType(), v.getLoc());
}

ParseResult LoopOp::parse(OpAsmParser& p, OperationState& st) {
  OpAsmParser::Argument iv;
  OpAsmParser::UnresolvedOperand count;
  int64_t stages = 1;
  Type idx = p.getBuilder().getIndexType();
  if (p.parseArgument(iv) || p.parseKeyword("to") || p.parseOperand(count) ||
      p.resolveOperand(count, idx, st.operands))
    return failure();
  iv.type = idx;
  if (succeeded(p.parseOptionalKeyword("stages")) && p.parseInteger(stages)) return failure();
  st.addAttribute("stages", p.getBuilder().getI64IntegerAttr(stages));
  SmallVector<OpAsmParser::Argument> args{iv};
  if (succeeded(p.parseOptionalKeyword("carry"))) {
    auto parseCarry = [&]() -> ParseResult {
      OpAsmParser::Argument a;
      OpAsmParser::UnresolvedOperand init;
      if (p.parseArgument(a) || p.parseEqual() || p.parseOperand(init) || p.parseColon() ||
          p.parseType(a.type) || p.resolveOperand(init, a.type, st.operands))
        return failure();
      st.addTypes(a.type);
      args.push_back(a);
      return success();
    };
    if (p.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseCarry)) return failure();
  }
  if (p.parseOptionalAttrDictWithKeyword(st.attributes)) return failure();
  Region* body = st.addRegion();
  if (p.parseRegion(*body, args)) return failure();
  LoopOp::ensureTerminator(*body, p.getBuilder(), st.location);
  return success();
}

void LoopOp::print(OpAsmPrinter& p) {
  p << " ";
  p.printOperand(getInductionVar());
  p << " to " << getCount() << " stages " << getStages();
  if (!getInits().empty()) {
    p << " carry(";
    for (auto [i, arg] : llvm::enumerate(getCarried())) {
      if (i) p << ", ";
      p.printOperand(arg);
      p << " = " << getInits()[i] << " : " << arg.getType();
    }
    p << ")";
  }
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(), {getStagesAttrName()});
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/!getInits().empty());
}

LogicalResult LoopOp::verifyRegions() {
  Block& body = getBody().front();
  if (body.getNumArguments() != getInits().size() + 1 || !body.getArgument(0).getType().isIndex())
    return emitOpError("body must take an index and one argument per carried value");
  for (auto [i, init] : llvm::enumerate(getInits())) {
    if (body.getArgument(i + 1).getType() != init.getType())
      return emitOpError("body argument #") << i + 1 << " is " << body.getArgument(i + 1).getType()
                                            << " but carried value #" << i << " is " << init.getType();
    if (getResult(i).getType() != init.getType())
      return emitOpError("result #") << i << " is " << getResult(i).getType()
                                     << " but carried value #" << i << " is " << init.getType();
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != getInits().size())
    return emitOpError("carries ") << getInits().size() << " values but its body yields "
                                   << yield.getValues().size();
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (v.getType() != getInits()[i].getType())
      return emitOpError("carried value #") << i << " is " << getInits()[i].getType()
                                            << " but the body yields " << v.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Memory ops
//===----------------------------------------------------------------------===//

LogicalResult ViewOp::verify() {
  auto t = getTensor().getType();
  auto v = getResult().getType();
  if ((int64_t)getIndices().size() != t.getRank())
    return emitOpError("needs ") << t.getRank() << " tile indices for a rank-" << t.getRank()
                                 << " tensor, got " << getIndices().size();
  if (v.getRank() > t.getRank())
    return emitOpError("view rank ") << v.getRank() << " is more than the tensor's rank " << t.getRank();
  if (v.getElementType() != t.getElementType())
    return emitOpError("view element type ") << v.getElementType()
                                             << " does not match tensor element type "
                                             << t.getElementType();
  if (bool(getWindowStart()) != bool(getWindowSize()) || bool(getWindowStart()) != getWindowDim().has_value())
    return emitOpError("needs a window's start, size and dim together");
  if (hasWindow()) {
    // Tile indices count from the window's start along a dim the tile spans; the innermost
    // dim keeps its own alignment (vector loads, TMA rows), so it is never windowed.
    const int64_t d = int64_t(*getWindowDim()), lead = t.getRank() - v.getRank();
    if (d < lead || d >= t.getRank() - 1) {
      auto diag = emitOpError("windows dim ") << d << ", but a window must be along a dim the view's tile spans, not the innermost: ";
      if (lead >= t.getRank() - 1) return diag << "this view's tile spans the innermost dim only";
      if (lead == t.getRank() - 2) return diag << "dim " << lead << " here";
      return diag << "dims " << lead << " to " << t.getRank() - 2 << " here";
    }
  }
  return success();
}

LogicalResult ReadOp::verify() {
  auto t = getTensor().getType();
  if ((int64_t)getIndices().size() != t.getRank())
    return emitOpError("needs ") << t.getRank() << " element indices for a rank-" << t.getRank() << " tensor, got "
                                 << getIndices().size();
  if (!t.getElementType().isInteger(32))
    return emitOpError("reads i32 tensors only, got ") << t.getElementType() << "; load a float tensor into a tile";
  auto arg = dyn_cast<BlockArgument>(getTensor());
  auto kernel = (*this)->getParentOfType<KernelOp>();
  if (!arg || !kernel || arg.getOwner() != &kernel.getBody().front())
    return emitOpError("reads a kernel argument only");
  if (kernel.isOutput(arg.getArgNumber())) return emitOpError("reads an input only, not an output");
  return success();
}

LogicalResult LoadOp::verify() {
  auto v = getView().getType();
  auto t = getResult().getType();
  if (v.getShape() != t.getShape())
    return emitOpError("tile shape ") << shapeStr(t.getShape()) << " does not match view shape "
                                      << shapeStr(v.getShape());
  if (v.getElementType() != t.getElementType())
    return emitOpError("loads ") << v.getElementType() << " elements into a "
                                 << t.getElementType() << " tile; load, then tile.cast";
  return success();
}

LogicalResult StoreOp::verify() {
  auto v = getView().getType();
  auto t = getValue().getType();
  // Code outside the grid runs once per program on a GPU, not once: a store there would
  // race with the grid's own stores.
  if (!(*this)->getParentOfType<GridOp>())
    if (auto kernel = (*this)->getParentOfType<KernelOp>())
      if (!kernel.getBody().front().getOps<GridOp>().empty())
        return emitOpError("is outside the tile.grid of a kernel that has one; move it into the grid");
  if (auto view = getView().getDefiningOp<ViewOp>())
    if (auto arg = dyn_cast<BlockArgument>(view.getTensor()))
      if (auto kernel = dyn_cast<KernelOp>(arg.getOwner()->getParentOp()))
        if (arg.getArgNumber() < kernel.getOutputs().size() &&
            arg.getArgNumber() < kernel.getArgNames().size() && !kernel.isOutput(arg.getArgNumber()))
          return emitOpError("writes to argument '") << kernel.getArgName(arg.getArgNumber())
                                                     << "', which is an 'in' argument";
  if (v.getShape() != t.getShape())
    return emitOpError("tile shape ") << shapeStr(t.getShape()) << " does not match view shape "
                                      << shapeStr(v.getShape());
  if (v.getElementType() != t.getElementType())
    return emitOpError("stores a ") << t.getElementType() << " tile into a "
                                    << v.getElementType() << " view; tile.cast it first";
  return success();
}

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

LogicalResult DotOp::verify() {
  auto a = getLhs().getType(), b = getRhs().getType(), c = getAcc().getType();
  if (a.getRank() != 2 || b.getRank() != 2 || c.getRank() != 2)
    return emitOpError("operands must be rank-2 tiles");
  if (a.getShape()[1] != b.getShape()[0])
    return emitOpError("K of lhs (") << a.getShape()[1] << ") does not match K of rhs ("
                                     << b.getShape()[0] << ")";
  if (c.getShape()[0] != a.getShape()[0] || c.getShape()[1] != b.getShape()[1])
    return emitOpError("accumulator is ") << shapeStr(c.getShape()) << " but lhs @ rhs is "
                                          << a.getShape()[0] << "x" << b.getShape()[1];
  if (a.getElementType() != b.getElementType())
    return emitOpError("lhs is ") << a.getElementType() << " but rhs is " << b.getElementType();
  if (!c.getElementType().isF32()) return emitOpError("accumulator must be f32");
  return success();
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError("changes the shape from ")
           << shapeStr(getInput().getType().getShape()) << " to "
           << shapeStr(getResult().getType().getShape());
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType()) return getInput();
  return {};
}

LogicalResult ConvertLayoutOp::verify() {
  TileType in = getInput().getType(), out = getResult().getType();
  if (in.getShape() != out.getShape() || in.getElementType() != out.getElementType())
    return emitOpError("changes more than the encoding: ") << in << " to " << out;
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  ArrayRef<int64_t> dims = getDims();
  if ((int64_t)dims.size() != in.getRank())
    return emitOpError("needs one target dim per input dim");
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type; use tile.cast");
  int64_t prev = -1;
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d <= prev || d >= out.getRank())
      return emitOpError("target dims must be increasing and < result rank");
    if (in.getShape()[i] != out.getShape()[d])
      return emitOpError("input dim ") << i << " (" << in.getShape()[i]
                                       << ") does not match result dim " << d << " ("
                                       << out.getShape()[d] << ")";
    prev = d;
  }
  return success();
}

template <typename Op>
static LogicalResult verifyReduce(Op op) {
  auto in = op.getInput().getType(), out = op.getResult().getType();
  int64_t dim = op.getDim();
  if (in.getRank() < 2) return op.emitOpError("input must have rank >= 2");
  if (dim < 0 || dim >= in.getRank())
    return op.emitOpError("dim ") << dim << " is out of range for a rank-" << in.getRank()
                                  << " tile";
  SmallVector<int64_t> expect(in.getShape());
  expect.erase(expect.begin() + dim);
  if (ArrayRef<int64_t>(expect) != out.getShape())
    return op.emitOpError("result shape must be ") << shapeStr(expect) << ", got "
                                                   << shapeStr(out.getShape());
  if (in.getElementType() != out.getElementType())
    return op.emitOpError("changes the element type; use tile.cast");
  return success();
}
LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

LogicalResult CmpOp::verify() {
  StringRef p = getPredicate();
  if (p != "lt" && p != "le" && p != "gt" && p != "ge" && p != "eq" && p != "ne")
    return emitOpError("predicate must be one of lt, le, gt, ge, eq, ne, got \"") << p << "\"";
  return success();
}

/// The largest integer n such that every integer in [0, n] is exact in float type `t`.
static int64_t exactIntegers(Type t) {
  if (t.isBF16()) return 256;
  if (t.isF16()) return 2048;
  return int64_t(1) << 24;
}

LogicalResult IotaOp::verify() {
  TileType t = getType();
  int64_t dim = getDim();
  if (dim < 0 || dim >= t.getRank())
    return emitOpError("dim ") << dim << " is out of range for a rank-" << t.getRank() << " tile";
  // Only a 16-bit type can fail: f32 holds every index of a tile (2^20 elements at most).
  if (t.getShape()[dim] - 1 > exactIntegers(t.getElementType()))
    return emitOpError("indexes up to ") << t.getShape()[dim] - 1 << " along dim " << dim << " are not exact in "
                                         << (t.getElementType().isBF16() ? "bf16" : "f16") << " (at most "
                                         << exactIntegers(t.getElementType()) << "): use f32";
  return success();
}

LogicalResult TransposeOp::verify() {
  TileType in = getInput().getType(), out = getType();
  if (in.getRank() != 2) return emitOpError("needs a rank-2 tile, got rank ") << in.getRank();
  if (in.getElementType() != out.getElementType()) return emitOpError("changes the element type; use tile.cast");
  if (out.getRank() != 2 || out.getShape()[0] != in.getShape()[1] || out.getShape()[1] != in.getShape()[0])
    return emitOpError("result shape must be ") << shapeStr({in.getShape()[1], in.getShape()[0]}) << ", got "
                                                << shapeStr(out.getShape());
  return success();
}
