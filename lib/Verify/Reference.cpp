#include "kiln/reference.hpp"

#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/error.hpp"

namespace kiln::reference {

namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw Error(ErrorKind::InvalidArgument, std::string("reference::") + fn + ": " + what);
}

void check_view(const char* fn, const char* name, const TensorView& v, int64_t rank) {
  if (v.rank() != rank)
    fail(fn, std::string(name) + " must be rank " + std::to_string(rank) + ", got " +
                 v.describe());
  if (!v.strides.empty() && v.strides.size() != v.dims.size())
    fail(fn, std::string(name) + " has " + std::to_string(v.strides.size()) +
                 " strides for rank " + std::to_string(rank));
  for (int64_t d : v.dims)
    if (d < 0) fail(fn, std::string(name) + " has a negative dim: " + v.describe());
  if (v.numel() > 0 && v.data == nullptr)
    fail(fn, std::string(name) + " has a null data pointer: " + v.describe());
}

Matrix read_matrix(const char* fn, const char* name, const TensorView& v) {
  check_view(fn, name, v, 2);
  const std::vector<int64_t> st = v.effective_strides();
  Matrix m(v.dims[0], v.dims[1]);
  for (int64_t i = 0; i < v.dims[0]; ++i)
    for (int64_t j = 0; j < v.dims[1]; ++j)
      m(i, j) = load_as_f32(v.data, v.dtype, i * st[0] + j * st[1]);
  return m;
}

Eigen::RowVectorXd read_vector(const char* fn, const char* name, const TensorView& v,
                               int64_t expected_len) {
  check_view(fn, name, v, 1);
  if (v.dims[0] != expected_len)
    fail(fn, std::string(name) + " must have length " + std::to_string(expected_len) +
                 ", got " + v.describe());
  const int64_t s = v.effective_strides()[0];
  Eigen::RowVectorXd r(expected_len);
  for (int64_t i = 0; i < expected_len; ++i) r(i) = load_as_f32(v.data, v.dtype, i * s);
  return r;
}

// Any rank, row-major order; for the elementwise references.
std::vector<double> read_flat(const char* fn, const char* name, const TensorView& v) {
  check_view(fn, name, v, v.rank());
  std::vector<double> out;
  out.reserve(static_cast<size_t>(v.numel()));
  std::vector<int64_t> idx(v.dims.size(), 0);
  for (int64_t i = 0, n = v.numel(); i < n; ++i) {
    out.push_back(load_as_f32(v.data, v.dtype, v.offset_of(idx)));
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < v.dims[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

std::vector<double> to_vector(const Matrix& m) {
  return std::vector<double>(m.data(), m.data() + m.size());
}

} // namespace

double gelu(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

std::vector<double> gemm(const TensorView& a, const TensorView& b, const TensorView* bias,
                         Epilogue epilogue, const TensorView* residual) {
  const Matrix ma = read_matrix("gemm", "A", a);
  const Matrix mb = read_matrix("gemm", "B", b);
  if (ma.cols() != mb.rows())
    fail("gemm", "A.dims[1] must equal B.dims[0] (K), got A " + a.describe() + " and B " +
                     b.describe());
  Matrix c = ma * mb;
  if (residual) {
    const Matrix r = read_matrix("gemm", "residual", *residual);
    if (r.rows() != c.rows() || r.cols() != c.cols())
      fail("gemm", "residual must be [" + std::to_string(c.rows()) + "x" + std::to_string(c.cols()) +
                       "] (M x N), got " + residual->describe());
    c += r;
  }
  if (epilogue == Epilogue::none) return to_vector(c);

  if (bias == nullptr) fail("gemm", "bias is required for a bias, bias_relu or bias_gelu epilogue");
  c.rowwise() += read_vector("gemm", "bias", *bias, c.cols());
  if (epilogue == Epilogue::bias_relu)
    c = c.cwiseMax(0.0);
  else if (epilogue == Epilogue::bias_gelu)
    c = c.unaryExpr([](double x) { return gelu(x); });
  return to_vector(c);
}

std::vector<double> softmax(const TensorView& x) {
  Matrix m = read_matrix("softmax", "X", x);
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    if (m.cols() == 0) break;
    // Subtracting the row max keeps exp() finite for large inputs.
    auto row = m.row(i);
    row = (row.array() - row.maxCoeff()).exp().matrix();
    row /= row.sum();
  }
  return to_vector(m);
}

std::vector<double> attention(const TensorView& q, const TensorView& k, const TensorView& v, bool causal,
                              const std::vector<int64_t>& rows, std::vector<double>* lse) {
  for (auto [name, t] : {std::pair{"Q", &q}, {"K", &k}, {"V", &v}}) check_view("attention", name, *t, 4);
  if (lse) lse->clear();
  const int64_t B = q.dims[0], H = q.dims[1], T = q.dims[2], D = q.dims[3], G = k.dims[1], S = k.dims[2];
  if (k.dims != v.dims || k.dims[0] != B || k.dims[3] != D)
    fail("attention", "K and V must be [B, G, S, D] with Q's B and D, got Q " + q.describe() + ", K " +
                          k.describe() + ", V " + v.describe());
  if (T > S)
    fail("attention", "Q's " + std::to_string(T) + " queries must be at most K's " + std::to_string(S) +
                          " positions (they are the sequence's last ones), got Q " + q.describe() + ", K " + k.describe());
  if (G < 1 || H % G != 0)
    fail("attention", "Q's heads (" + std::to_string(H) + ") must be a multiple of K's (" + std::to_string(G) + ")");
  const std::vector<int64_t> qs = q.effective_strides(), ks = k.effective_strides(), vs = v.effective_strides();
  std::vector<int64_t> all;
  if (rows.empty())
    for (int64_t r = 0; r < B * H * T; ++r) all.push_back(r);
  const std::vector<int64_t>& want = rows.empty() ? all : rows;
  std::vector<double> out, p(static_cast<size_t>(S)), qrow(static_cast<size_t>(D));
  out.reserve(want.size() * size_t(D));
  const double scale = 1.0 / std::sqrt(double(D));
  for (int64_t r : want) {
    if (r < 0 || r >= B * H * T) fail("attention", "row " + std::to_string(r) + " is outside O's B*H*T rows");
    const int64_t n = r / (H * T), h = r / T % H, i = r % T, g = h / (H / G);
    for (int64_t d = 0; d < D; ++d) qrow[size_t(d)] = load_as_f32(q.data, q.dtype, n * qs[0] + h * qs[1] + i * qs[2] + d * qs[3]);
    const int64_t last = causal ? i + S - T : S - 1;
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t c = 0; c <= last; ++c) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d)
        s += qrow[size_t(d)] * load_as_f32(k.data, k.dtype, n * ks[0] + g * ks[1] + c * ks[2] + d * ks[3]);
      p[size_t(c)] = s * scale;
      m = std::max(m, p[size_t(c)]);
    }
    for (int64_t c = 0; c <= last; ++c) sum += (p[size_t(c)] = std::exp(p[size_t(c)] - m));
    if (lse) lse->push_back(m + std::log(sum));
    const size_t at = out.size();
    out.resize(at + size_t(D), 0.0);
    for (int64_t c = 0; c <= last; ++c)
      for (int64_t d = 0; d < D; ++d)
        out[at + size_t(d)] += p[size_t(c)] / sum * load_as_f32(v.data, v.dtype, n * vs[0] + g * vs[1] + c * vs[2] + d * vs[3]);
  }
  return out;
}

std::vector<double> add(const TensorView& x, const TensorView& y) {
  if (x.dims != y.dims)
    fail("add", "X and Y must have the same dims, got X " + x.describe() + " and Y " +
                    y.describe());
  std::vector<double> out = read_flat("add", "X", x);
  const std::vector<double> yv = read_flat("add", "Y", y);
  for (size_t i = 0; i < out.size(); ++i) out[i] += yv[i];
  return out;
}

std::vector<double> rmsnorm(const TensorView& x, const TensorView& w, double eps) {
  if (!(eps >= 0)) fail("rmsnorm", "eps must be >= 0, got " + std::to_string(eps));
  Matrix m = read_matrix("rmsnorm", "X", x);
  const Eigen::RowVectorXd wv = read_vector("rmsnorm", "W", w, m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    if (m.cols() == 0) break;
    const double ms = m.row(i).squaredNorm() / static_cast<double>(m.cols());
    m.row(i) = m.row(i).cwiseProduct(wv) / std::sqrt(ms + eps);
  }
  return to_vector(m);
}

std::vector<double> swiglu(const TensorView& x, const TensorView& wg, const TensorView& wu) {
  const Matrix mx = read_matrix("swiglu", "X", x);
  const Matrix g = read_matrix("swiglu", "Wg", wg), u = read_matrix("swiglu", "Wu", wu);
  if (g.rows() != mx.cols())
    fail("swiglu", "Wg.dims[0] must equal X.dims[1] (K), got X " + x.describe() + " and Wg " + wg.describe());
  if (u.rows() != g.rows() || u.cols() != g.cols())
    fail("swiglu", "Wu must have Wg's dims [K, N], got Wg " + wg.describe() + " and Wu " + wu.describe());
  const Matrix gate = mx * g, up = mx * u;
  const Matrix h = gate.binaryExpr(up, [](double a, double b) { return a / (1.0 + std::exp(-a)) * b; });
  return to_vector(h);
}

std::vector<double> rope(const TensorView& x, const TensorView& cos, const TensorView& sin,
                         const TensorView& positions) {
  check_view("rope", "X", x, 3);
  const int64_t T = x.dims[0], H = x.dims[1], D = x.dims[2];
  if (D % 2 != 0) fail("rope", "X's head dim D must be even, got " + x.describe());
  const Matrix c = read_matrix("rope", "Cos", cos), s = read_matrix("rope", "Sin", sin);
  if (c.cols() != D / 2 || s.rows() != c.rows() || s.cols() != c.cols())
    fail("rope", "Cos and Sin must both be [P, D/2] with D/2 = " + std::to_string(D / 2) + ", got Cos " +
                     cos.describe() + " and Sin " + sin.describe());
  check_view("rope", "Positions", positions, 1);
  if (positions.dtype != DType::i32 || positions.dims[0] != T)
    fail("rope", "Positions must be i32 [T] = [" + std::to_string(T) + "], got " + positions.describe());
  const std::vector<double> in = read_flat("rope", "X", x);
  std::vector<double> out(in.size());
  const int64_t half = D / 2, ps = positions.effective_strides()[0];
  for (int64_t t = 0; t < T; ++t) {
    const int64_t p = int64_t(load_as_f32(positions.data, DType::i32, t * ps));
    if (p < 0 || p >= c.rows())
      fail("rope", "Positions[" + std::to_string(t) + "] = " + std::to_string(p) + " is outside the tables' " +
                       std::to_string(c.rows()) + " rows");
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const size_t a = size_t((t * H + h) * D + i), b = a + size_t(half);
        out[a] = in[a] * c(p, i) - in[b] * s(p, i);
        out[b] = in[b] * c(p, i) + in[a] * s(p, i);
      }
  }
  return out;
}

} // namespace kiln::reference
