//! Tensor maps for the Hopper copy engine (TMA): one safe wrapper over the driver's
//! `cuTensorMapEncodeTiled`, which checks first that TMA can describe the operand at all
//! (16-byte aligned base and strides, dimensions and box in range) and says why not otherwise.

use cudarc::driver::DeviceRepr;
use cudarc::driver::sys::{
    self, CUresult, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};

use crate::DType;

/// An encoded `CUtensorMap`: 128 opaque bytes the kernel receives by value (64-byte aligned).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap {
    pub opaque: [u64; 16],
}

// SAFETY: plain bytes with the layout of `CUtensorMap`; the kernels declare these parameters
// as 128-byte, 64-byte aligned aggregates.
unsafe impl DeviceRepr for TensorMap {}

const _: () = assert!(std::mem::size_of::<TensorMap>() == 128);

/// A row-major 3-D tensor of 16-bit or 32-bit elements: `rows x cols` matrices (`cols`
/// contiguous, rows `ld` elements apart), `batch` of them `stride` elements apart, loaded in
/// boxes of `box_rows x box_cols` with the swizzle as wide as a box row (`box_cols` elements
/// must be 128, 64 or 32 bytes: the 128-, 64- or 32-byte swizzle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileMap {
    pub dtype: DType,
    pub base: u64,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub batch: usize,
    pub stride: usize,
    pub box_rows: u32,
    pub box_cols: u32,
}

/// Why TMA cannot describe an operand (the caller then takes a path without TMA).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TmaError {
    #[error("base address {0:#x} is not 16-byte aligned")]
    UnalignedBase(u64),
    #[error("{what} of {bytes} bytes is not a multiple of 16 (or exceeds 2^40)")]
    BadStride { what: &'static str, bytes: u64 },
    #[error("dimension {what} = {value} is 0 or exceeds 2^32")]
    BadDim { what: &'static str, value: usize },
    #[error("box {rows} x {cols} elements does not fit a swizzle (at most 256 rows of 128, 64 or 32 bytes)")]
    BadBox { rows: u32, cols: u32 },
    #[error("cuTensorMapEncodeTiled refused the map: {0:?}")]
    Driver(CUresult),
}

impl TileMap {
    /// Checks everything the driver checks that this crate can know in advance.
    pub fn validate(&self) -> Result<(), TmaError> {
        let es = self.dtype.size_bytes() as u64;
        if !self.base.is_multiple_of(16) {
            return Err(TmaError::UnalignedBase(self.base));
        }
        for (what, value) in [("cols", self.cols), ("rows", self.rows), ("batch", self.batch)] {
            if value == 0 || value as u64 > 1 << 32 {
                return Err(TmaError::BadDim { what, value });
            }
        }
        let strides = [("leading dimension", self.ld as u64 * es), ("batch stride", self.batch_stride_bytes())];
        for (what, bytes) in strides {
            if !bytes.is_multiple_of(16) || bytes >= 1 << 40 || bytes == 0 {
                return Err(TmaError::BadStride { what, bytes });
            }
        }
        if self.box_rows == 0 || self.box_rows > 256 || self.swizzle().is_none() {
            return Err(TmaError::BadBox { rows: self.box_rows, cols: self.box_cols });
        }
        Ok(())
    }

    /// The swizzle as wide as a box row, if there is one (rows of 128, 64 or 32 bytes).
    fn swizzle(&self) -> Option<CUtensorMapSwizzle> {
        match self.box_cols as u64 * self.dtype.size_bytes() as u64 {
            128 => Some(CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B),
            64 => Some(CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B),
            32 => Some(CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B),
            _ => None,
        }
    }

    /// The batch stride in bytes; a single matrix gets its own size (TMA never steps it).
    fn batch_stride_bytes(&self) -> u64 {
        let es = self.dtype.size_bytes() as u64;
        if self.batch > 1 { self.stride as u64 * es } else { self.rows as u64 * self.ld as u64 * es }
    }

    /// Encodes the map (validated first).
    pub fn encode(&self) -> Result<TensorMap, TmaError> {
        self.validate()?;
        let swizzle = self.swizzle().ok_or(TmaError::BadBox { rows: self.box_rows, cols: self.box_cols })?;
        let ty = match self.dtype {
            DType::Bf16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            DType::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            DType::F32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        };
        let es = self.dtype.size_bytes() as u64;
        let dims = [self.cols as u64, self.rows as u64, self.batch as u64];
        let strides = [self.ld as u64 * es, self.batch_stride_bytes()];
        let boxes = [self.box_cols, self.box_rows, 1];
        let elem_strides = [1u32; 3];
        let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::uninit();
        // SAFETY: every pointer argument points at a live array of the rank (3, or 2 for the
        // strides) the driver reads; `map` is written by the call before it is read. The base
        // address is only recorded, not dereferenced.
        let r = unsafe {
            sys::cuTensorMapEncodeTiled(
                map.as_mut_ptr(),
                ty,
                3,
                self.base as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                elem_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        if r != CUresult::CUDA_SUCCESS {
            return Err(TmaError::Driver(r));
        }
        // SAFETY: the driver initialised the map (success above).
        let map = unsafe { map.assume_init() };
        Ok(TensorMap { opaque: map.opaque })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> TileMap {
        TileMap {
            dtype: DType::Bf16,
            base: 0x1000,
            rows: 100,
            cols: 64,
            ld: 64,
            batch: 1,
            stride: 0,
            box_rows: 128,
            box_cols: 64,
        }
    }

    #[test]
    fn validation_names_what_tma_cannot_describe() {
        assert_eq!(map().validate(), Ok(()));
        assert_eq!(TileMap { base: 0x1008, ..map() }.validate(), Err(TmaError::UnalignedBase(0x1008)));
        assert!(matches!(TileMap { ld: 65, ..map() }.validate(), Err(TmaError::BadStride { .. })));
        assert!(matches!(TileMap { batch: 2, stride: 7, ..map() }.validate(), Err(TmaError::BadStride { .. })));
        assert_eq!(TileMap { batch: 2, stride: 6400, ..map() }.validate(), Ok(()));
        assert!(matches!(TileMap { box_cols: 128, ..map() }.validate(), Err(TmaError::BadBox { .. })));
        // Rows of 64 and 32 bytes take the 64- and 32-byte swizzles; 48 bytes has none.
        assert_eq!(TileMap { box_cols: 32, ..map() }.swizzle(), Some(CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B));
        assert_eq!(TileMap { box_cols: 16, ..map() }.swizzle(), Some(CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B));
        assert!(matches!(TileMap { box_cols: 24, ..map() }.validate(), Err(TmaError::BadBox { .. })));
        assert!(matches!(TileMap { rows: 0, ..map() }.validate(), Err(TmaError::BadDim { .. })));
    }
}
