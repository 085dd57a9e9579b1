//! The committed corpus and every regression input replayed through the
//! fuzz targets on the stable toolchain (unit tier: no privilege).

mod unit;
