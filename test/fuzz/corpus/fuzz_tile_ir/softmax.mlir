module {
  tile.kernel @softmax(in %X: !tile.tensor<[M, N], bf16>, out %Y: !tile.tensor<[M, N], bf16>) {
    %M = tile.dim "M"
    %N = tile.dim "N"
    %c4 = arith.constant 4 : index
    %0 = arith.ceildivsi %M, %c4 : index
    tile.grid (%arg0) in (%0) {
      %c256 = arith.constant 256 : index
      %1 = arith.ceildivsi %N, %c256 : index
      %2 = tile.full 0xFFF0000000000000 : <4xf32>
      %3 = tile.full 0.000000e+00 : <4xf32>
      %4:2 = tile.loop %arg1 to %1 stages 1 carry(%arg2 = %2 : !tile.tile<4xf32>, %arg3 = %3 : !tile.tile<4xf32>) {
        %5 = tile.view %X[%arg0, %arg1] : <[M, N], bf16> -> <4x256xbf16>
        %6 = tile.load %5 {padding = 0xFFF0000000000000 : f64} : <4x256xbf16> -> <4x256xbf16>
        %7 = tile.cast %6 : <4x256xbf16> -> <4x256xf32>
        %8 = tile.reduce_max %7 dim 1 : <4x256xf32> -> <4xf32>
        %9 = tile.max %arg2, %8 : <4xf32>
        %10 = tile.sub %arg2, %9 : <4xf32>
        %11 = tile.exp %10 : <4xf32>
        %12 = tile.mul %arg3, %11 : <4xf32>
        %13 = tile.broadcast %9 [0] : <4xf32> -> <4x256xf32>
        %14 = tile.sub %7, %13 : <4x256xf32>
        %15 = tile.exp %14 : <4x256xf32>
        %16 = tile.reduce_sum %15 dim 1 : <4x256xf32> -> <4xf32>
        %17 = tile.add %12, %16 : <4xf32>
        tile.yield %9, %17 : !tile.tile<4xf32>, !tile.tile<4xf32>
      }
      tile.loop %arg1 to %1 stages 1 {
        %5 = tile.view %X[%arg0, %arg1] : <[M, N], bf16> -> <4x256xbf16>
        %6 = tile.load %5 {padding = 0xFFF0000000000000 : f64} : <4x256xbf16> -> <4x256xbf16>
        %7 = tile.cast %6 : <4x256xbf16> -> <4x256xf32>
        %8 = tile.view %Y[%arg0, %arg1] : <[M, N], bf16> -> <4x256xbf16>
        %9 = tile.broadcast %4#0 [0] : <4xf32> -> <4x256xf32>
        %10 = tile.sub %7, %9 : <4x256xf32>
        %11 = tile.exp %10 : <4x256xf32>
        %12 = tile.broadcast %4#1 [0] : <4xf32> -> <4x256xf32>
        %13 = tile.div %11, %12 : <4x256xf32>
        %14 = tile.cast %13 : <4x256xf32> -> <4x256xbf16>
        tile.store %14, %8 : <4x256xbf16>, <4x256xbf16>
      }
    }
  }
}
