//! iiBench: the purchases table (transactionid auto-increment primary key;
//! dateandtime, cashregisterid, customerid, productid, price) and its three
//! secondary indexes, each stored as its own ordered table whose key is the
//! indexed columns followed by the primary key (so entries are unique), with
//! an empty value: what a SQL engine keeps in a secondary B-tree.

use crate::engine::WriteOp;
use crate::keys::mix64;
use crate::values::ValueGen;

/// Table names, in the order the harness opens them after the main table.
pub const PURCHASES: &str = "purchases";
pub const IX_PRICE_CUSTOMER: &str = "ix_price_customer";
pub const IX_REGISTER_PRICE_CUSTOMER: &str = "ix_cashregister_price_customer";
pub const IX_PRICE_DATE_CUSTOMER: &str = "ix_price_dateandtime_customer";

/// Value ranges as in the original iiBench.
pub const CASH_REGISTERS: u32 = 1000;
pub const CUSTOMERS: u32 = 100_000;
pub const PRODUCTS: u32 = 10_000;
/// Prices in cents, below 5000.00.
pub const PRICE_CENTS: u32 = 500_000;
/// Simulated clock: rows per second of `dateandtime`, starting at `EPOCH`.
pub const ROWS_PER_SECOND: u64 = 1000;
pub const EPOCH: u64 = 1_700_000_000;

/// One purchases row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub transactionid: u64,
    pub dateandtime: u64,
    pub cashregisterid: u32,
    pub customerid: u32,
    pub productid: u32,
    pub price: u32,
}

impl Row {
    /// Row `id`, its columns derived from `seed` and `id` alone.
    pub fn generate(id: u64, seed: u64) -> Self {
        let h = |salt: u64| mix64(id ^ mix64(seed ^ salt));
        Self {
            transactionid: id,
            dateandtime: EPOCH + id / ROWS_PER_SECOND,
            cashregisterid: (h(1) % CASH_REGISTERS as u64) as u32,
            customerid: (h(2) % CUSTOMERS as u64) as u32,
            productid: (h(3) % PRODUCTS as u64) as u32,
            price: (h(4) % PRICE_CENTS as u64) as u32,
        }
    }

    /// Primary key: transactionid big-endian.
    pub fn pk(&self) -> Vec<u8> {
        self.transactionid.to_be_bytes().to_vec()
    }

    /// Row value: the columns (24 bytes) followed by `pad` filler bytes.
    pub fn value(&self, pad: &ValueGen) -> Vec<u8> {
        let mut v = Vec::with_capacity(24 + pad.size());
        v.extend_from_slice(&self.dateandtime.to_be_bytes());
        v.extend_from_slice(&self.cashregisterid.to_be_bytes());
        v.extend_from_slice(&self.customerid.to_be_bytes());
        v.extend_from_slice(&self.productid.to_be_bytes());
        v.extend_from_slice(&self.price.to_be_bytes());
        v.extend(pad.value(self.transactionid, 0));
        v
    }

    /// Parses the columns back out of a row value.
    pub fn decode(transactionid: u64, v: &[u8]) -> Option<Self> {
        let u32_at = |o: usize| Some(u32::from_be_bytes(v.get(o..o + 4)?.try_into().ok()?));
        Some(Self {
            transactionid,
            dateandtime: u64::from_be_bytes(v.get(..8)?.try_into().ok()?),
            cashregisterid: u32_at(8)?,
            customerid: u32_at(12)?,
            productid: u32_at(16)?,
            price: u32_at(20)?,
        })
    }

    /// Key of (price, customerid) + pk.
    pub fn ix_price_customer(&self) -> Vec<u8> {
        cat(&[
            &self.price.to_be_bytes(),
            &self.customerid.to_be_bytes(),
            &self.pk(),
        ])
    }

    /// Key of (cashregisterid, price, customerid) + pk.
    pub fn ix_register_price_customer(&self) -> Vec<u8> {
        cat(&[
            &self.cashregisterid.to_be_bytes(),
            &self.price.to_be_bytes(),
            &self.customerid.to_be_bytes(),
            &self.pk(),
        ])
    }

    /// Key of (price, dateandtime, customerid) + pk.
    pub fn ix_price_date_customer(&self) -> Vec<u8> {
        cat(&[
            &self.price.to_be_bytes(),
            &self.dateandtime.to_be_bytes(),
            &self.customerid.to_be_bytes(),
            &self.pk(),
        ])
    }

    /// The four writes of inserting this row: the row and one entry per index.
    /// `tables` are the table numbers of purchases and the three indexes.
    pub fn ops(&self, tables: [usize; 4], pad: &ValueGen) -> [WriteOp; 4] {
        let put = |table, key, value| WriteOp::Put { table, key, value };
        [
            put(tables[0], self.pk(), self.value(pad)),
            put(tables[1], self.ix_price_customer(), Vec::new()),
            put(tables[2], self.ix_register_price_customer(), Vec::new()),
            put(tables[3], self.ix_price_date_customer(), Vec::new()),
        ]
    }
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Compressibility;

    #[test]
    fn index_keys_hold_the_columns_in_order() {
        let pad = ValueGen::new(Compressibility::Random, 10, 1);
        let r = Row::generate(123_456, 7);
        assert_eq!(r.dateandtime, EPOCH + 123);
        assert!(r.cashregisterid < CASH_REGISTERS && r.customerid < CUSTOMERS);
        assert!(r.productid < PRODUCTS && r.price < PRICE_CENTS);
        let k = r.ix_register_price_customer();
        assert_eq!(k.len(), 4 + 4 + 4 + 8);
        assert_eq!(
            u32::from_be_bytes(k[0..4].try_into().unwrap()),
            r.cashregisterid
        );
        assert_eq!(u32::from_be_bytes(k[4..8].try_into().unwrap()), r.price);
        assert_eq!(
            u32::from_be_bytes(k[8..12].try_into().unwrap()),
            r.customerid
        );
        assert_eq!(u64::from_be_bytes(k[12..].try_into().unwrap()), 123_456);
        let k = r.ix_price_date_customer();
        assert_eq!(
            u64::from_be_bytes(k[4..12].try_into().unwrap()),
            r.dateandtime
        );
        assert_eq!(Row::decode(123_456, &r.value(&pad)), Some(r));
        assert_eq!(r.value(&pad).len(), 34);
    }

    #[test]
    fn index_order_is_column_order() {
        // Byte order of index keys must equal tuple order of the columns.
        let rows: Vec<Row> = (0..2000).map(|i| Row::generate(i, 3)).collect();
        let mut by_bytes = rows.clone();
        by_bytes.sort_by_key(|r| r.ix_price_customer());
        let mut by_tuple = rows;
        by_tuple.sort_by_key(|r| (r.price, r.customerid, r.transactionid));
        assert_eq!(by_bytes, by_tuple);
    }
}
