#include "Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln::tile;

#include "Dialect/Tile/TileDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "Dialect/Tile/TileTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Dialect/Tile/TileAttrs.cpp.inc"

void TileDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "Dialect/Tile/TileTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Dialect/Tile/TileAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "Dialect/Tile/TileOps.cpp.inc"
      >();
}

bool kiln::tile::isSupportedElementType(Type t) { return t.isF32() || t.isF16() || t.isBF16(); }

static LogicalResult checkElementType(function_ref<InFlightDiagnostic()> emitError, Type t,
                                      StringRef what) {
  if (!isSupportedElementType(t))
    return emitError() << what << " element type must be f32, f16 or bf16, got " << t;
  return success();
}

//===----------------------------------------------------------------------===//
// !tile.tensor<[M, 128], bf16>
//===----------------------------------------------------------------------===//

StringRef TensorArgType::getDimSymbol(unsigned i) const {
  if (auto s = dyn_cast<StringAttr>(getDims()[i])) return s.getValue();
  return {};
}

int64_t TensorArgType::getDimConstant(unsigned i) const {
  if (auto c = dyn_cast<IntegerAttr>(getDims()[i])) return c.getInt();
  return -1;
}

Type TensorArgType::parse(AsmParser& p) {
  SmallVector<Attribute> dims;
  auto parseDim = [&]() -> ParseResult {
    int64_t c;
    OptionalParseResult r = p.parseOptionalInteger(c);
    if (r.has_value()) {
      if (failed(*r)) return failure();
      dims.push_back(p.getBuilder().getI64IntegerAttr(c));
      return success();
    }
    StringRef name;
    if (p.parseKeyword(&name)) return failure();
    dims.push_back(p.getBuilder().getStringAttr(name));
    return success();
  };
  Type elt;
  if (p.parseLess() ||
      p.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim) || p.parseComma() ||
      p.parseType(elt) || p.parseGreater())
    return {};
  return p.getChecked<TensorArgType>(p.getContext(), p.getBuilder().getArrayAttr(dims), elt);
}

void TensorArgType::print(AsmPrinter& p) const {
  p << "<[";
  llvm::interleaveComma(getDims(), p, [&](Attribute a) {
    if (auto s = dyn_cast<StringAttr>(a)) p << s.getValue();
    else p << cast<IntegerAttr>(a).getInt();
  });
  p << "], " << getElementType() << ">";
}

LogicalResult TensorArgType::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr dims,
                                 Type elt) {
  if (dims.empty()) return emitError() << "tensor must have rank >= 1";
  for (Attribute a : dims) {
    if (auto c = dyn_cast<IntegerAttr>(a)) {
      if (c.getInt() < 0) return emitError() << "tensor dim must be >= 0, got " << c.getInt();
    } else if (auto s = dyn_cast<StringAttr>(a)) {
      if (s.getValue().empty()) return emitError() << "tensor dim symbol must not be empty";
    } else {
      return emitError() << "tensor dim must be a symbol name or an integer";
    }
  }
  // i32: a tensor of indices (lengths, offsets) read an element at a time by tile.read.
  if (elt.isInteger(32) || isSupportedElementType(elt)) return success();
  return emitError() << "tensor element type must be f32, f16, bf16 or i32, got " << elt;
}

//===----------------------------------------------------------------------===//
// !tile.view<128x64xbf16> and !tile.tile<128x64xf32>
//===----------------------------------------------------------------------===//

static ParseResult parseShapeAndType(AsmParser& p, SmallVectorImpl<int64_t>& shape, Type& elt) {
  if (p.parseLess() || p.parseDimensionList(shape, /*allowDynamic=*/false) ||
      p.parseType(elt) || p.parseGreater())
    return failure();
  return success();
}

static void printShapeAndType(AsmPrinter& p, ArrayRef<int64_t> shape, Type elt) {
  p << "<";
  for (int64_t d : shape) p << d << "x";
  p << elt << ">";
}

static std::string printDims(ArrayRef<int64_t> shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

static LogicalResult verifyShape(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> shape, Type elt, StringRef what) {
  if (shape.empty() || shape.size() > 3)
    return emitError() << what << " rank must be 1, 2 or 3, got " << shape.size();
  for (int64_t d : shape)
    if (d <= 0) return emitError() << what << " dims must be positive, got " << d;
  // A tile lives in a program's registers or shared memory: 2^20 elements is far past what
  // either holds, and bounds what the lowerings unroll (a 4096 x 4096 accumulator compiled
  // for minutes; 65536^2 exhausted LLVM). Checked with the dims bounded first: no overflow.
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d > kMaxTileElements || (elements *= d) > kMaxTileElements)
      return emitError() << what << " of " << printDims(shape) << " elements exceeds kiln's limit of "
                         << kMaxTileElements << " (2^20) elements per tile";
  }
  return checkElementType(emitError, elt, what);
}

Type ViewType::parse(AsmParser& p) {
  SmallVector<int64_t> shape;
  Type elt;
  if (parseShapeAndType(p, shape, elt)) return {};
  return p.getChecked<ViewType>(p.getContext(), shape, elt);
}
void ViewType::print(AsmPrinter& p) const { printShapeAndType(p, getShape(), getElementType()); }
LogicalResult ViewType::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<int64_t> shape, Type elt) {
  return verifyShape(emitError, shape, elt, "view");
}

Type TileType::parse(AsmParser& p) {
  SmallVector<int64_t> shape;
  Type elt;
  Attribute encoding;
  if (p.parseLess() || p.parseDimensionList(shape, /*allowDynamic=*/false) || p.parseType(elt)) return {};
  if (succeeded(p.parseOptionalComma()) && p.parseAttribute(encoding)) return {};
  if (p.parseGreater()) return {};
  return p.getChecked<TileType>(p.getContext(), shape, elt, encoding);
}
void TileType::print(AsmPrinter& p) const {
  p << "<";
  for (int64_t d : getShape()) p << d << "x";
  p << getElementType();
  if (getEncoding()) p << ", " << getEncoding();
  p << ">";
}
LogicalResult TileType::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<int64_t> shape, Type elt, Attribute encoding) {
  if (encoding && !isa<BlockedLayoutAttr, MmaLayoutAttr>(encoding))
    return emitError() << "tile encoding must be #tile.blocked or #tile.mma<...>, got " << encoding;
  if (auto m = dyn_cast_or_null<MmaLayoutAttr>(encoding)) {
    if (shape.size() == 1 && shape[0] != m.getWarpsM() * m.getFragsM() * 16)
      return emitError() << "a rank-1 tile in " << encoding << " holds its " << m.getWarpsM() * m.getFragsM() * 16
                         << " rows, not " << shape[0];
    if (shape.size() > 2) return emitError() << "an mma encoding is for rank 1 or 2 tiles, not rank " << shape.size();
  }
  return verifyShape(emitError, shape, elt, "tile");
}
int64_t TileType::getNumElements() const {
  int64_t n = 1;
  for (int64_t d : getShape()) n *= d;
  return n;
}
