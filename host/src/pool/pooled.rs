//! A device slice whose memory belongs to the caching pool: it reads as a cudarc
//! `CudaSlice` (views, pointers, copies) and gives its block back to the pool when dropped.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice, SyncOnDrop};

use super::arena::Owner;
use super::device::{DevicePool, stream_owner};
use crate::error::Result;

/// `len` elements of `T` in a pool block, bound to the stream that allocated them.
pub struct Pooled<T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    pool: Arc<DevicePool>,
    owner: Owner,
    addr: CUdeviceptr,
}

impl<T: DeviceRepr> Pooled<T> {
    /// `len` uninitialised elements for work on `stream`.
    pub fn uninit(pool: &Arc<DevicePool>, stream: &Arc<CudaStream>, len: usize) -> Result<Pooled<T>> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| crate::Error::OutOfMemory {
            requested: usize::MAX,
            available: 0,
            what: format!("{len} elements of {} bytes (overflows the address space)", size_of::<T>()),
        })?;
        let g = pool.allocate(stream, bytes)?;
        // SAFETY: the block at `g.addr` holds at least `bytes` bytes, is handed out to this
        // slice only, and outlives it (the pool keeps segments until their blocks are free).
        // The slice never frees it: `Drop` leaks it back to an address and returns the block.
        let slice = unsafe { stream.upgrade_device_ptr::<T>(g.addr, len) };
        Ok(Pooled { slice: ManuallyDrop::new(slice), pool: pool.clone(), owner: g.owner, addr: g.addr })
    }
}

impl<T> Pooled<T> {
    /// The block's address (what the pool knows it by).
    pub fn addr(&self) -> CUdeviceptr {
        self.addr
    }

    /// Marks the memory as used on `stream` too: it is reused only after the work queued
    /// there before the buffer is dropped has completed (PyTorch's `record_stream`).
    pub fn record_stream(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.pool.record_use(self.addr(), stream)
    }

    /// Returns the memory to the pool on behalf of `stream`, which must be the stream that
    /// allocated it or one recorded with `record_stream`; otherwise the typed error says so
    /// and the memory is returned on its own stream instead (nothing leaks).
    pub fn release_on(mut self, stream: &CudaStream) -> Result<()> {
        let by = stream_owner(stream);
        // SAFETY: `self` is forgotten below, so the slice is taken exactly once.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        let addr = slice.leak();
        let (pool, owner) = (self.pool.clone(), self.owner);
        std::mem::forget(self);
        match pool.free(addr, owner, by) {
            Ok(()) => Ok(()),
            Err(e) => {
                pool.free(addr, owner, owner)?;
                Err(e)
            }
        }
    }
}

impl<T> Drop for Pooled<T> {
    fn drop(&mut self) {
        // SAFETY: drop runs once; the slice is not used after this.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        // `leak` makes the owning stream wait for the slice's tracked reads and writes, so the
        // block is free in that stream's order after every use cudarc knows of.
        let addr = slice.leak();
        if let Err(e) = self.pool.free(addr, self.owner, self.owner) {
            log::error!("pool: freeing block {addr:#x} failed: {e}");
        }
    }
}

impl<T> Deref for Pooled<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> DerefMut for Pooled<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }
}

impl<T> DeviceSlice<T> for Pooled<T> {
    fn len(&self) -> usize {
        self.slice.len()
    }
    fn stream(&self) -> &Arc<CudaStream> {
        self.slice.stream()
    }
}

impl<T> DevicePtr<T> for Pooled<T> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.slice.device_ptr(stream)
    }
}

impl<T> DevicePtrMut<T> for Pooled<T> {
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.slice.device_ptr_mut(stream)
    }
}

impl<T> std::fmt::Debug for Pooled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pooled({} elements, owner {:#x})", self.slice.len(), self.owner.0)
    }
}
