// SPDX-License-Identifier: MIT
// The charts' library: uPlot (pinned in package.json), minified by the build (esbuild) into one
// module served as /ui/vendor/uplot.mjs. This file is the bundle's entry, not served itself.
// charts.js imports the bundle and says the charts are missing when it is absent.
export { default } from 'uplot';
