module {
  tile.kernel @gemm_bias_relu(in %A: !tile.tensor<[M, K], bf16>, in %B: !tile.tensor<[K, N], bf16>, in %bias: !tile.tensor<[N], bf16>, out %C: !tile.tensor<[M, N], bf16>) {
    %M = tile.dim "M"
    %N = tile.dim "N"
    %K = tile.dim "K"
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivsi %M, %c64 : index
    %c64_0 = arith.constant 64 : index
    %1 = arith.ceildivsi %N, %c64_0 : index
    tile.grid (%arg0, %arg1) in (%0, %1) {
      %c32 = arith.constant 32 : index
      %2 = arith.ceildivsi %K, %c32 : index
      %3 = tile.full 0.000000e+00 : <64x64xf32>
      %4 = tile.loop %arg2 to %2 stages 3 carry(%arg3 = %3 : !tile.tile<64x64xf32>) {
        %13 = tile.view %A[%arg0, %arg2] : <[M, K], bf16> -> <64x32xbf16>
        %14 = tile.load %13 : <64x32xbf16> -> <64x32xbf16>
        %15 = tile.view %B[%arg2, %arg1] : <[K, N], bf16> -> <32x64xbf16>
        %16 = tile.load %15 : <32x64xbf16> -> <32x64xbf16>
        %17 = tile.dot %14, %16, %arg3 : <64x32xbf16>, <32x64xbf16> -> <64x64xf32>
        tile.yield %17 : !tile.tile<64x64xf32>
      }
      %5 = tile.view %bias[%arg1] : <[N], bf16> -> <64xbf16>
      %6 = tile.load %5 : <64xbf16> -> <64xbf16>
      %7 = tile.cast %6 : <64xbf16> -> <64xf32>
      %8 = tile.broadcast %7 [1] : <64xf32> -> <64x64xf32>
      %9 = tile.add %4, %8 : <64x64xf32>
      %10 = tile.relu %9 : <64x64xf32>
      %11 = tile.view %C[%arg0, %arg1] : <[M, N], bf16> -> <64x64xbf16>
      %12 = tile.cast %10 : <64x64xf32> -> <64x64xbf16>
      tile.store %12, %11 : <64x64xbf16>, <64x64xbf16>
    }
  }
}
