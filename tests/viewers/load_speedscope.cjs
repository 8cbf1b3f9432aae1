// Load profiles into speedscope in headless Chromium and report what speedscope said.
//
//   node load_speedscope.cjs SPEEDSCOPE_RELEASE_DIR CHROMIUM OUT_DIR FILE...
//
// Serves speedscope's release directory and each FILE on 127.0.0.1 (no other network), opens
// speedscope with #profileURL= pointing at the file, waits until speedscope has named the
// profile in the page title, then saves a screenshot OUT_DIR/<file name>.png. Prints one JSON
// line per file: {"file", "ok", "ms", "title", "warnings": [...], "errors": [...]}. Needs
// playwright-core (NODE_PATH) and Debian's chromium. Exit status 0 when it ran, whatever
// speedscope said; the caller judges.
'use strict';

const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const [releaseDir, chromiumPath, outDir, ...files] = process.argv.slice(2);

const types = {
	'.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
	'.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
	'.woff2': 'font/woff2', '.ico': 'image/x-icon', '.txt': 'text/plain',
};

function serve() {
	const server = http.createServer((req, res) => {
		const url = decodeURIComponent(req.url.split('?')[0]);
		let file;
		if (url.startsWith('/profile/')) {
			const i = Number(url.slice('/profile/'.length));
			file = files[i];
		} else {
			file = path.join(releaseDir, path.normalize(url === '/' ? '/index.html' : url));
			if (!file.startsWith(path.resolve(releaseDir))) file = null;
		}
		if (!file || !fs.existsSync(file)) {
			res.writeHead(404);
			res.end();
			return;
		}
		res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
		fs.createReadStream(file).pipe(res);
	});
	return new Promise(resolve => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function main() {
	const server = await serve();
	const port = server.address().port;
	const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tfs-speedscope-'));
	const context = await chromium.launchPersistentContext(profileDir, {
		executablePath: chromiumPath,
		headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
		       '--disable-background-networking', '--disable-component-update',
		       '--disable-sync'],
		viewport: { width: 1400, height: 800 },
	});
	try {
		for (let i = 0; i < files.length; i++) {
			const page = await context.newPage();
			const warnings = [], errors = [];
			page.on('console', m => {
				if (m.type() === 'warning') warnings.push(m.text().slice(0, 300));
				if (m.type() === 'error') errors.push(m.text().slice(0, 300));
			});
			page.on('pageerror', e => errors.push(String(e).slice(0, 300)));
			const name = path.basename(files[i]);
			const t0 = Date.now();
			let ok = true, title = '';
			try {
				await page.goto(`http://127.0.0.1:${port}/index.html#profileURL=` +
					encodeURIComponent(`http://127.0.0.1:${port}/profile/${i}?${name}`));
				await page.waitForFunction(() => / - speedscope$/.test(document.title),
					null, { timeout: 600000, polling: 200 });
				title = await page.title();
				await page.waitForTimeout(500);
			} catch (e) {
				ok = false;
				errors.push(String(e).slice(0, 300));
			}
			const ms = Date.now() - t0;
			await page.screenshot({ path: path.join(outDir, name + '.png') });
			console.log(JSON.stringify({ file: files[i], ok, ms, title, warnings, errors }));
			await page.close();
		}
	} finally {
		await context.close();
		server.close();
		fs.rmSync(profileDir, { recursive: true, force: true });
	}
}

main().catch(e => {
	console.error(String(e));
	process.exit(1);
});
