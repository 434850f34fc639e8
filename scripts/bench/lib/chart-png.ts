// A line chart as a PNG: Chart.js (the console's charting library) drawn on a canvas in
// headless Chromium (playwright-core, the system's browser: BENCH_CHROMIUM, else
// /usr/bin/chromium), the canvas saved as the image. No browser: no image, and the caller
// says so.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium } from 'playwright-core';

export interface LineSeries {
  label: string;
  points: Array<{ x: number; y: number }>;
  /** Drawn dashed (e.g. a goal line). */
  dashed?: boolean;
}

export interface LineChart {
  title: string;
  xLabel: string;
  yLabel: string;
  series: LineSeries[];
}

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#7f7f7f', '#ff7f0e'];

export function chromiumPath(): string | undefined {
  const browser = process.env.BENCH_CHROMIUM ?? '/usr/bin/chromium';
  return existsSync(browser) ? browser : undefined;
}

/** Writes the chart to `file`; false when there is no browser to draw it with. */
export async function writeLineChartPng(chart: LineChart, file: string): Promise<boolean> {
  const executablePath = chromiumPath();
  if (!executablePath) return false;
  // The UMD build beside the package's main file (its exports map does not list it).
  const main = createRequire(import.meta.url).resolve('chart.js');
  const library = readFileSync(path.join(path.dirname(main), 'chart.umd.min.js'), 'utf8');
  const config = {
    type: 'line',
    data: {
      datasets: chart.series.map((s, i) => ({
        label: s.label,
        data: s.points,
        borderColor: COLOURS[i % COLOURS.length],
        backgroundColor: COLOURS[i % COLOURS.length],
        borderDash: s.dashed ? [6, 4] : [],
        pointRadius: s.dashed ? 0 : 3,
        tension: 0,
      })),
    },
    options: {
      animation: false,
      responsive: false,
      plugins: { title: { display: true, text: chart.title, font: { size: 16 } } },
      scales: {
        x: { type: 'linear', title: { display: true, text: chart.xLabel } },
        y: { type: 'linear', beginAtZero: true, title: { display: true, text: chart.yLabel } },
      },
    },
  };
  const browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 960, height: 540 } });
    await page.setContent(
      `<!doctype html><body style="margin:0;background:#fff"><canvas id="c" width="960" height="540"></canvas></body>`,
    );
    await page.addScriptTag({ content: library });
    // A string, evaluated in the page (this project compiles without the DOM's types).
    await page.evaluate(`new Chart(document.getElementById('c'), ${JSON.stringify(config)})`);
    writeFileSync(file, await page.locator('#c').screenshot({ type: 'png' }));
    return true;
  } finally {
    await browser.close();
  }
}
