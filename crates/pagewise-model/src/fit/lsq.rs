//! Small weighted least squares with non-negative coefficients: enough for
//! two- and three-parameter cost models, solved exactly by trying every set
//! of coefficients pinned at zero (2^p normal-equation solves, p <= 3).

/// One observation: basis values, target, weight.
pub struct Obs {
    pub x: Vec<f64>,
    pub y: f64,
    pub w: f64,
}

/// Coefficients >= 0 minimising sum w (y - x.c)^2, and that sum.
pub fn nnls(obs: &[Obs], p: usize) -> Option<(Vec<f64>, f64)> {
    let mut best: Option<(Vec<f64>, f64)> = None;
    for mask in 1u32..(1 << p) {
        let free: Vec<usize> = (0..p).filter(|i| mask & (1 << i) != 0).collect();
        let Some(sol) = solve_subset(obs, &free) else {
            continue;
        };
        if sol.iter().any(|c| *c < 0.0) {
            continue;
        }
        let mut coef = vec![0.0; p];
        for (k, &i) in free.iter().enumerate() {
            coef[i] = sol[k];
        }
        let sse = sse(obs, &coef);
        if best.as_ref().is_none_or(|(_, b)| sse < *b) {
            best = Some((coef, sse));
        }
    }
    best
}

pub fn sse(obs: &[Obs], coef: &[f64]) -> f64 {
    obs.iter()
        .map(|o| {
            let r = o.y - dot(&o.x, coef);
            o.w * r * r
        })
        .sum()
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Normal equations over the columns in `free`, by Gaussian elimination with
/// partial pivoting. Columns are scaled to unit size first: block sizes span
/// 512 B..1 MiB, and unscaled normal equations lose digits.
fn solve_subset(obs: &[Obs], free: &[usize]) -> Option<Vec<f64>> {
    let k = free.len();
    let scale: Vec<f64> = free
        .iter()
        .map(|&i| {
            let m = obs.iter().map(|o| o.x[i].abs()).fold(0.0, f64::max);
            if m > 0.0 {
                m
            } else {
                1.0
            }
        })
        .collect();
    let mut a = vec![vec![0.0; k + 1]; k];
    for o in obs {
        let xs: Vec<f64> = free.iter().zip(&scale).map(|(&i, s)| o.x[i] / s).collect();
        for r in 0..k {
            for c in 0..k {
                a[r][c] += o.w * xs[r] * xs[c];
            }
            a[r][k] += o.w * xs[r] * o.y;
        }
    }
    for col in 0..k {
        let piv = (col..k).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[piv][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, piv);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    let sol: Vec<f64> = (0..k).map(|i| a[i][k] / a[i][i] / scale[i]).collect();
    sol.iter().all(|v| v.is_finite()).then_some(sol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_line() {
        let obs: Vec<Obs> = (1..6)
            .map(|i| {
                let x = i as f64 * 1000.0;
                Obs {
                    x: vec![1.0, x],
                    y: 3.0 + 0.5 * x,
                    w: 1.0,
                }
            })
            .collect();
        let (c, sse) = nnls(&obs, 2).unwrap();
        assert!(
            (c[0] - 3.0).abs() < 1e-9 && (c[1] - 0.5).abs() < 1e-12,
            "{c:?}"
        );
        assert!(sse < 1e-12);
    }

    #[test]
    fn pins_negative_intercept_at_zero() {
        // y = -1 + 2x would fit exactly; non-negative: intercept 0.
        let obs: Vec<Obs> = [1.0, 2.0, 3.0]
            .iter()
            .map(|&x| Obs {
                x: vec![1.0, x],
                y: -1.0 + 2.0 * x,
                w: 1.0,
            })
            .collect();
        let (c, _) = nnls(&obs, 2).unwrap();
        assert_eq!(c[0], 0.0);
        // Through the origin: slope = sum xy / sum x^2 = (1+6+15)/14.
        assert!((c[1] - 22.0 / 14.0).abs() < 1e-12);
    }
}
